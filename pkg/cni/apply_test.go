package cni

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// resourceVersions reads back every object and returns kind/ns/name -> rv.
func resourceVersions(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(cfg)
	out := map[string]string{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		gvr := guessGVR(t, gvk)
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if u.GetNamespace() != "" {
			ri = dyn.Resource(gvr).Namespace(u.GetNamespace())
		}
		got, err := ri.Get(t.Context(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading back %s %s: %v", gvk.Kind, describe(u), err)
		}
		managed := false
		for _, mf := range got.GetManagedFields() {
			managed = managed || (mf.Manager == FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply)
		}
		if !managed {
			t.Errorf("%s %s not applied by field manager %s", gvk.Kind, describe(u), FieldManager)
		}
		out[gvk.Kind+" "+describe(u)] = got.GetResourceVersion()
	}
	return out
}

// guessGVR maps the kinds the plan contains to resources (the test avoids
// the code under test's own discovery).
func guessGVR(t *testing.T, gvk schema.GroupVersionKind) schema.GroupVersionResource {
	t.Helper()
	special := map[string]string{"NetworkAttachmentDefinition": nadPlural, "DeviceClass": "deviceclasses", "SriovResourcePolicy": "sriovresourcepolicies"}
	res, ok := special[gvk.Kind]
	if !ok {
		res = strings.ToLower(gvk.Kind) + "s"
	}
	return gvk.GroupVersion().WithResource(res)
}

const testNetworkName = "sriov-lane-smoke"

func TestApplyTwiceChangesNothing(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, cs := startAPI(t)
	ensureDefaultServiceAccount(t, cs, "default")
	o := defaultTestOptions()
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// A NetworkAttachmentDefinition, as verify's smoke network, in the same
	// batch as its CRD: exercises the CRD Established wait.
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": testNetworkName, "namespace": "default"},
		"spec":     map[string]any{"config": `{"cniVersion":"0.3.1","name":"` + testNetworkName + `","type":"sriov"}`},
	}})
	// Under -v, as the user sees them: one V(1) line per object.
	var out bytes.Buffer
	if err := Apply(t.Context(), clients(t, cfg), objs, log.NewPrinter(&out, true)); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	if len(lines) != len(objs) {
		t.Errorf("%d log lines for %d objects", len(lines), len(objs))
	}
	// Objects of a tier are applied concurrently; the log still follows objs.
	for i := range min(len(lines), len(objs)) {
		if want := "applied " + objs[i].GetKind() + " "; !strings.HasPrefix(lines[i], want) || !strings.Contains(lines[i], objs[i].GetName()) {
			t.Errorf("log line %d = %q, want %s%s", i, lines[i], want, describe(objs[i]))
		}
	}
	first := resourceVersions(t, cfg, objs)
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	second := resourceVersions(t, cfg, objs)
	for k, rv := range first {
		if second[k] != rv {
			t.Errorf("%s changed on re-apply: resourceVersion %s -> %s", k, rv, second[k])
		}
	}
	nad, err := dynamic.NewForConfigOrDie(cfg).Resource(NADResource).Namespace("default").Get(t.Context(), testNetworkName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(nad.Object, "spec", "config"); !strings.Contains(c, `"type":"sriov"`) {
		t.Errorf("NAD config %q", c)
	}

	// Someone edits a field the lane owns: the next apply takes it back
	// (force conflicts) and the edited object changes, the rest does not.
	cm, err := cs.CoreV1().ConfigMaps(DefaultNamespace).Get(t.Context(), DevicePluginConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := cm.Data[DevicePluginConfigKey]
	cm.Data[DevicePluginConfigKey] = "{}"
	if _, err := cs.CoreV1().ConfigMaps(DefaultNamespace).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatalf("apply over a conflicting edit: %v", err)
	}
	cm, _ = cs.CoreV1().ConfigMaps(DefaultNamespace).Get(t.Context(), DevicePluginConfigMap, metav1.GetOptions{})
	if cm.Data[DevicePluginConfigKey] != want {
		t.Errorf("edited device plugin config not restored: %q", cm.Data[DevicePluginConfigKey])
	}
}

func TestApplyCalicoWaitsForCRD(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, _ := startAPI(t)
	o := defaultTestOptions()
	o.CNI = config.CNICalico
	o.Calico, _ = testCalicoOptions(t)
	o.Calico.CacheDir = t.TempDir()
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), objs, log.NewPrinter(t.Output(), true)); err != nil {
		t.Fatal(err)
	}
	inst, err := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}).
		Get(t.Context(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(inst.Object, "spec", "calicoNetwork", "containerIPForwarding"); v != "Enabled" {
		t.Errorf("containerIPForwarding = %q", v)
	}
	first := resourceVersions(t, cfg, objs)
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	for k, rv := range resourceVersions(t, cfg, objs) {
		if first[k] != rv {
			t.Errorf("%s changed on re-apply", k)
		}
	}
}

// A kubeconfig-built rest.Config carries client-go's default rate limit
// (QPS 5, burst 10): Apply, through the clients a run makes
// (kube.ForConfig), must not be throttled by it, nor change the caller's
// config.
func TestApplyIsNotClientThrottled(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, _ := startAPI(t)
	kc := rest.CopyConfig(cfg)
	kc.QPS, kc.Burst = 0, 0 // what clientcmd leaves: client-go's defaults
	// client-go's default token bucket (DefaultQPS 5, DefaultBurst 10,
	// k8s.io/client-go rest/config.go@v0.37.2) passes n requests no sooner
	// than (n-10)/5 s: 18 s for 100, so a throttled Apply can never pass
	// the bound below, while an unthrottled one has over ten times what it
	// needs even under make test's load. (40 objects in 3 s measured the
	// machine: it failed under load.)
	const n, bound = 100, 15 * time.Second
	var objs []*unstructured.Unstructured
	for i := range n {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName(fmt.Sprintf("throttle-%03d", i))
		u.SetNamespace("default")
		// A field of its own: an apply that owns none leaves no managedFields.
		u.Object["data"] = map[string]any{"i": fmt.Sprint(i)}
		objs = append(objs, u)
	}
	start := time.Now()
	if err := Apply(t.Context(), clients(t, kc), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("applying %d ConfigMaps took %s: client-side throttling", len(objs), d)
	}
	if kc.QPS != 0 || kc.Burst != 0 {
		t.Errorf("Apply changed the caller's config: QPS %v, burst %d", kc.QPS, kc.Burst)
	}
	resourceVersions(t, cfg, objs)
}

func TestTiersKeepOrderAndSplitByRank(t *testing.T) {
	obj := func(apiVersion, kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	objs := []*unstructured.Unstructured{
		obj("v1", "Namespace", "a"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "x.example.com"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "y.example.com"),
		obj("v1", "ConfigMap", "c1"),
		obj("v1", "ConfigMap", "c2"),
		obj("apps/v1", "DaemonSet", "d1"),
		obj("v1", "ConfigMap", "c3"), // out of rank order: stays after d1
		obj("example.com/v1", "X", "x1"),
		obj("example.com/v1", "X", "x2"),
		obj("example.com/v1", "Y", "y1"),
		// A custom kind named like a built-in one ranks with the custom ones.
		obj("example.com/v1", "ConfigMap", "custom"),
	}
	var got []string
	for _, tier := range tiers(objs) {
		var names []string
		for _, u := range tier {
			names = append(names, u.GetName())
		}
		got = append(got, strings.Join(names, ","))
	}
	want := []string{"a", "x.example.com,y.example.com", "c1,c2", "d1", "c3", "x1,x2", "y1", "custom"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("tiers:\n got  %v\n want %v", got, want)
	}
}
