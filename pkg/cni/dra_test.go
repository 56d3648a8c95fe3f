package cni

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

func draOptions() Options {
	o := defaultTestOptions()
	o.VFAllocation = config.VFAllocationDRA
	return o
}

func componentNames(t *testing.T, o Options) []string {
	t.Helper()
	o.Calico.Offline = true
	cs, err := Components(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

// DRA mode deploys the driver in place of sriov-cni and the device plugin,
// and keeps Multus, as kubevirtci's DRA branch does
// (cluster-up/cluster/kind-sriov/config_sriov_cluster.sh@39bd4947ba4d).
func TestDRAModeReplacesDevicePluginAndSRIOVCNI(t *testing.T) {
	for alloc, want := range map[string]string{
		"":                              "flannel multus sriov-cni sriov-device-plugin",
		config.VFAllocationDevicePlugin: "flannel multus sriov-cni sriov-device-plugin",
		config.VFAllocationDRA:          "flannel multus dra-driver-sriov",
	} {
		o := defaultTestOptions()
		o.VFAllocation = alloc
		if got := strings.Join(componentNames(t, o), " "); got != want {
			t.Errorf("vfAllocation %q: components %q, want %q", alloc, got, want)
		}
	}
	o := defaultTestOptions()
	o.VFAllocation = "claims"
	if _, err := o.WithDefaults(); err == nil || !strings.Contains(err.Error(), `"claims"`) {
		t.Errorf("an unknown VF allocation: %v", err)
	}
}

// The DRA objects are what a real API server takes: its CRDs are valid
// and Established, the DeviceClass is served at resource.k8s.io/v1, the
// default policy passes the policy CRD's schema, and that schema refuses
// what the chart's refuses. A second apply changes nothing.
func TestDRAObjectsOnARealAPIServer(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, _ := startAPI(t)
	objs, err := Objects(t.Context(), draOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	first := resourceVersions(t, cfg, objs)
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	for k, rv := range resourceVersions(t, cfg, objs) {
		if first[k] != rv {
			t.Errorf("%s changed on re-apply", k)
		}
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	policies := dyn.Resource(schema.GroupVersionResource{Group: DRADriverName, Version: "v1alpha1", Resource: "sriovresourcepolicies"}).Namespace(DRANamespace)
	bad := map[string]map[string]any{
		"no spec":                     {},
		"linkType not known":          {"spec": map[string]any{"configs": []any{map[string]any{"resourceFilters": []any{map[string]any{"linkType": "wifi"}}}}}},
		"node selector without terms": {"spec": map[string]any{"nodeSelector": map[string]any{}}},
	}
	for what, body := range bad {
		u := &unstructured.Unstructured{Object: body}
		u.SetAPIVersion(draAPI)
		u.SetKind("SriovResourcePolicy")
		u.SetName("bad")
		if _, err := policies.Create(t.Context(), u, metav1.CreateOptions{}); err == nil {
			t.Errorf("a policy with %s was accepted", what)
			_ = policies.Delete(t.Context(), "bad", metav1.DeleteOptions{})
		}
	}
	attrs := dyn.Resource(schema.GroupVersionResource{Group: DRADriverName, Version: "v1alpha1", Resource: "deviceattributes"}).Namespace(DRANamespace)
	a := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"attributes": map[string]any{
		"k8s.cni.cncf.io/resourceName": map[string]any{"string": "sriov_net"},
	}}}}
	a.SetAPIVersion(draAPI)
	a.SetKind("DeviceAttributes")
	a.SetName("resource-name")
	if _, err := attrs.Create(t.Context(), a, metav1.CreateOptions{}); err != nil {
		t.Errorf("DeviceAttributes naming a resource, as the driver README's MULTUS mode asks: %v", err)
	}
	a.SetName("not-an-int")
	_ = unstructured.SetNestedField(a.Object, map[string]any{"int": "three"}, "spec", "attributes", "k8s.cni.cncf.io/resourceName")
	if _, err := attrs.Create(t.Context(), a, metav1.CreateOptions{}); err == nil {
		t.Error("an int attribute given a string was accepted")
	}
}
