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
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":   nadPlural + "." + nadGroup,
			"labels": map[string]any{managedByLabel: ManagedByLabelValue},
		},
		"spec": map[string]any{
			"group": nadGroup,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural":     nadPlural,
				"singular":   "network-attachment-definition",
				"kind":       "NetworkAttachmentDefinition",
				"shortNames": []any{"nad", "net-attach-def"},
			},
			"versions": []any{map[string]any{
				"name":    "v1",
				"served":  true,
				"storage": true,
				"schema":  map[string]any{"openAPIV3Schema": schema},
			}},
		},
	}}
}
