package cni

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestPlanGoldenDefault(t *testing.T) {
	objs, err := Objects(t.Context(), defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	var y, j bytes.Buffer
	if err := Render(&y, objs, "yaml"); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "plan-default.yaml"), y.Bytes(), *update)

	// Same objects twice: deterministic.
	again, _ := Objects(t.Context(), defaultTestOptions())
	var y2 bytes.Buffer
	_ = Render(&y2, again, "yaml")
	if !bytes.Equal(y.Bytes(), y2.Bytes()) {
		t.Fatal("two plans of the same options differ")
	}

	// JSON carries the same objects as the YAML stream.
	if err := Render(&j, objs, "json"); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(j.Bytes(), &list); err != nil || list.Kind != "List" || len(list.Items) != len(objs) {
		t.Fatalf("json list: kind %q, %d items, err %v", list.Kind, len(list.Items), err)
	}
	docs := strings.Split(y.String(), "---\n")[1:]
	if len(docs) != len(objs) {
		t.Fatalf("yaml stream has %d documents for %d objects", len(docs), len(objs))
	}
	for i, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(list.Items[i])
		if !bytes.Equal(a, b) {
			t.Errorf("object %d differs between yaml and json output", i)
		}
	}
	if err := Render(&j, objs, "toml"); err == nil {
		t.Error("unknown format accepted")
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s %s in plan", kind, name)
}

func allImages(objs []*unstructured.Unstructured) []string {
	var imgs []string
	for _, u := range objs {
		p, ok := podSpecPaths[u.GetKind()]
		if !ok {
			continue
		}
		spec, _, _ := unstructured.NestedMap(u.Object, p...)
		for _, f := range []string{"initContainers", "containers"} {
			cs, _ := spec[f].([]any)
			for _, c := range cs {
				imgs = append(imgs, c.(map[string]any)["image"].(string))
			}
		}
	}
	return imgs
}

func TestPlanContents(t *testing.T) {
	o := defaultTestOptions()
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// Apply order: namespaces, then CRDs, then the rest, custom resources last.
	rank := -1
	for _, u := range objs {
		r := kindRank(u)
		if r < rank {
			t.Fatalf("%s %s out of apply order", u.GetKind(), u.GetName())
		}
		rank = r
	}
	if objs[0].GetKind() != "Namespace" || objs[1].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("plan starts with %s, %s", objs[0].GetKind(), objs[1].GetKind())
	}
	for _, img := range allImages(objs) {
		if strings.HasSuffix(img, ":latest") || !strings.Contains(img[strings.LastIndex(img, "/")+1:], ":") {
			t.Errorf("image %q is not pinned by tag", img)
		}
	}

	var dp, cni, multus, flannel appsv1.DaemonSet
	find(t, objs, "DaemonSet", devicePluginDaemonSet, &dp)
	find(t, objs, "DaemonSet", sriovCNIDaemonSet, &cni)
	find(t, objs, "DaemonSet", multusDaemonSet, &multus)
	find(t, objs, "DaemonSet", flannelDaemonSet, &flannel)
	for _, ds := range []appsv1.DaemonSet{dp, cni} {
		if ds.Spec.Template.Spec.NodeSelector["sriov_capable"] != "true" || len(ds.Spec.Template.Spec.NodeSelector) != 1 {
			t.Errorf("%s nodeSelector = %v", ds.Name, ds.Spec.Template.Spec.NodeSelector)
		}
	}
	c := dp.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--resource-prefix=kubevirt.io") || !*c.SecurityContext.Privileged || !dp.Spec.Template.Spec.HostNetwork {
		t.Errorf("device plugin container: args %v", c.Args)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", DevicePluginConfigMap, &cm)
	if cm.Namespace != dp.Namespace {
		t.Errorf("device plugin in %s cannot mount its ConfigMap in %s", dp.Namespace, cm.Namespace)
	}
	dpc, err := ParseDPConfig([]byte(cm.Data[DevicePluginConfigKey]))
	if err != nil || dpc.ResourceList[0].Selectors[0].PFNames[1] != "ens1f1" {
		t.Fatalf("device plugin config: %v %+v", err, dpc)
	}
	mem := multus.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if mem.Cmp(resource.MustParse("200Mi")) < 0 {
		t.Errorf("multus memory limit %s would be OOM-killed", mem.String())
	}
	var mcm corev1.ConfigMap
	find(t, objs, "ConfigMap", multusConfigMap, &mcm)
	var dc multusDaemonConfig
	if err := json.Unmarshal([]byte(mcm.Data["daemon-config.json"]), &dc); err != nil || dc.CNIConfigDir != "/host/etc/cni/net.d" {
		t.Fatalf("multus daemon config %v: %+v", err, dc)
	}
	hostPaths := map[string]string{}
	for _, v := range multus.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if hostPaths["cni"] != "/etc/cni/net.d" || hostPaths["cnibin"] != "/opt/cni/bin" {
		t.Errorf("multus host CNI dirs: %v", hostPaths)
	}
	var fcm corev1.ConfigMap
	find(t, objs, "ConfigMap", flannelConfigMap, &fcm)
	if !strings.Contains(fcm.Data["net-conf.json"], `"10.42.0.0/16"`) || !strings.Contains(fcm.Data["cni-conf.json"], `"portmap"`) {
		t.Errorf("flannel config: %v", fcm.Data)
	}
	// The copier reads the node's /bin (where k3d nodes have k3s's
	// plugins) through a read-only mount, dereferencing the links.
	init0 := flannel.Spec.Template.Spec.InitContainers[0]
	if init0.Command[0] != "cp" || init0.Args[0] != "-fL" || !slices.Contains(init0.Args, "/host/bin/portmap") ||
		init0.VolumeMounts[0].MountPath != "/host/bin" || !init0.VolumeMounts[0].ReadOnly {
		t.Errorf("k3s plugin copier: %v %v %+v", init0.Command, init0.Args, init0.VolumeMounts)
	}
	for _, v := range flannel.Spec.Template.Spec.Volumes {
		if v.Name == "k3s-bin" && v.HostPath.Path != "/bin" {
			t.Errorf("k3s plugins read from %s, not the node's /bin", v.HostPath.Path)
		}
	}
}

func TestPlanMirrorAndNetdevice(t *testing.T) {
	o := defaultTestOptions()
	o.ImageRegistryMirror = "mirror.example:5000"
	o.VFDriver = config.VFDriverNetdevice
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	imgs := allImages(objs)
	if len(imgs) < 7 {
		t.Fatalf("only %d images found", len(imgs))
	}
	for _, img := range imgs {
		if !strings.HasPrefix(img, "mirror.example:5000/") {
			t.Errorf("image %q not rewritten through the mirror", img)
		}
	}
	// The smoke pod's busybox: pkg/smoke's TestObjectsMirrorAndVF.
	if !slices.Contains(imgs, "mirror.example:5000/k8snetworkplumbingwg/multus-cni:v4.3.0-thick") {
		t.Errorf("images: %v", imgs)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", DevicePluginConfigMap, &cm)
	dpc, err := ParseDPConfig([]byte(cm.Data[DevicePluginConfigKey]))
	if err != nil {
		t.Fatal(err)
	}
	if sel := dpc.ResourceList[0].Selectors; len(sel) != 1 || len(sel[0].Drivers) != 0 || !reflect.DeepEqual(sel[0].PFNames, o.PFNames) {
		t.Errorf("netdevice selectors %+v: want pfNames %v alone", sel, o.PFNames)
	}
}
