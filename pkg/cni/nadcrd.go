package cni

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NAD API coordinates; Multus watches these objects.
const (
	nadGroup  = "k8s.cni.cncf.io"
	nadPlural = "network-attachment-definitions"
)

var NADResource = schema.GroupVersionResource{Group: nadGroup, Version: "v1", Resource: nadPlural}

// nadCRD defines NetworkAttachmentDefinition as Multus ships it
// (k8snetworkplumbingwg/multus-cni deployments/multus-daemonset-thick.yml@v4.3.0,
// which added the "nad" short name). apiextensions types are not a
// dependency of the module, so the CRD is built as unstructured from the
// NAD specification (spec.config is the CNI config JSON string).
func nadCRD() *unstructured.Unstructured {
	str := map[string]any{"type": "string"}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"apiVersion": str,
			"kind":       str,
			"metadata":   map[string]any{"type": "object"},
			"spec": map[string]any{
				"type":       "object",
				"properties": map[string]any{"config": str},
			},
		},
	}
	return crdObject(nadGroup, "v1", "NetworkAttachmentDefinition", nadPlural, "network-attachment-definition", []string{"nad", "net-attach-def"}, schema)
}

// crdObject is a namespaced CRD of one served and stored version, as
// unstructured: apiextensions types are not a dependency of the module.
// listKind is left to the API server's default, kind + "List".
func crdObject(group, version, kind, plural, singular string, shortNames []string, schema map[string]any) *unstructured.Unstructured {
	names := map[string]any{"plural": plural, "singular": singular, "kind": kind}
	if len(shortNames) > 0 {
		short := make([]any, len(shortNames))
		for i, n := range shortNames {
			short[i] = n
		}
		names["shortNames"] = short
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":   plural + "." + group,
			"labels": map[string]any{managedByLabel: ManagedByLabelValue},
		},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": names,
			"versions": []any{map[string]any{
				"name":    version,
				"served":  true,
				"storage": true,
				"schema":  map[string]any{"openAPIV3Schema": schema},
			}},
		},
	}}
}
