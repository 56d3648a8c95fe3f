package cni

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// The driver's two CRDs, built as unstructured as nadCRD is (apiextensions
// types are not a dependency), from the chart's CRD templates at the
// pinned commit: deployments/helm/dra-driver-sriov/templates/
// sriovnetwork.k8snetworkplumbingwg.io_sriovresourcepolicies.yaml and
// _deviceattributes.yaml@14490e9d438b (controller-gen output of
// pkg/api/sriovdra/v1alpha1/api.go). The schemas keep every type, enum,
// required field and list or map type, so the API server refuses what it
// refuses for the chart's CRDs; the descriptions are left out.

// Schema builders for the two CRDs.
func sType(t string) map[string]any { return map[string]any{"type": t} }

func sObject(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		r := make([]any, len(required))
		for i, k := range required {
			r[i] = k
		}
		o["required"] = r
	}
	return o
}

func sArray(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

// sAtomic marks a list or map x-kubernetes-*-type: atomic.
func sAtomic(s map[string]any) map[string]any {
	if s["type"] == "array" {
		s["x-kubernetes-list-type"] = "atomic"
	} else {
		s["x-kubernetes-map-type"] = "atomic"
	}
	return s
}

// sRequirements is the schema of a label or node selector requirement list
// (key, operator, values), as controller-gen writes it for
// metav1.LabelSelectorRequirement and corev1.NodeSelectorRequirement.
func sRequirements() map[string]any {
	return sAtomic(sArray(sObject(map[string]any{
		"key":      sType("string"),
		"operator": sType("string"),
		"values":   sAtomic(sArray(sType("string"))),
	}, "key", "operator")))
}

func draPolicyCRDObject() *unstructured.Unstructured {
	strs := func() map[string]any { return sArray(sType("string")) }
	filter := sObject(map[string]any{
		"devices":        strs(),
		"drivers":        strs(),
		"linkType":       map[string]any{"type": "string", "enum": []any{"eth", "ib", "ethernet", "infiniband"}},
		"pciAddresses":   strs(),
		"pfNames":        strs(),
		"pfPciAddresses": strs(),
		"vendors":        strs(),
	})
	labelSelector := sAtomic(sObject(map[string]any{
		"matchExpressions": sRequirements(),
		"matchLabels":      map[string]any{"type": "object", "additionalProperties": sType("string")},
	}))
	nodeSelector := sAtomic(sObject(map[string]any{
		"nodeSelectorTerms": sAtomic(sArray(sAtomic(sObject(map[string]any{
			"matchExpressions": sRequirements(),
			"matchFields":      sRequirements(),
		})))),
	}, "nodeSelectorTerms"))
	spec := sObject(map[string]any{
		"configs": sArray(sObject(map[string]any{
			"deviceAttributesSelector": labelSelector,
			"resourceFilters":          sArray(filter),
		})),
		"nodeSelector": nodeSelector,
	})
	return draCRD("SriovResourcePolicy", "sriovresourcepolicies", "sriovresourcepolicy", spec)
}

func draAttributesCRDObject() *unstructured.Unstructured {
	list := func(t map[string]any) map[string]any { return sAtomic(sArray(t)) }
	integer := func() map[string]any { return map[string]any{"type": "integer", "format": "int64"} }
	attribute := sObject(map[string]any{
		"bool":     sType("boolean"),
		"bools":    list(sType("boolean")),
		"int":      integer(),
		"ints":     list(integer()),
		"string":   sType("string"),
		"strings":  list(sType("string")),
		"version":  sType("string"),
		"versions": list(sType("string")),
	})
	spec := sObject(map[string]any{
		"attributes": map[string]any{"type": "object", "additionalProperties": attribute},
	})
	// The chart's singular is the plural's spelling too.
	return draCRD("DeviceAttributes", "deviceattributes", "deviceattributes", spec)
}

// draCRD is a namespaced v1alpha1 CRD of the driver's group whose objects
// must have a spec.
func draCRD(kind, plural, singular string, spec map[string]any) *unstructured.Unstructured {
	schema := sObject(map[string]any{
		"apiVersion": sType("string"),
		"kind":       sType("string"),
		"metadata":   sType("object"),
		"spec":       spec,
	}, "spec")
	crd := crdObject(DRADriverName, "v1alpha1", kind, plural, singular, nil, schema)
	// controller-gen writes listKind, which the API server would default
	// to the same.
	names := crd.Object["spec"].(map[string]any)["names"].(map[string]any)
	names["listKind"] = kind + "List"
	return crd
}
