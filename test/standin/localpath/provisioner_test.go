package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pvController "sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

// k3s's config.json and helper pod template (k3s-io/k3s
// manifests/local-storage.yaml@v1.35.5+k3s1, with the default storage path).
const (
	k3sConfig = `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/var/lib/rancher/k3s/storage"]}]}`
	k3sHelper = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n  containers:\n  - name: helper-pod\n    image: rancher/mirrored-library-busybox:1.37.0\n    imagePullPolicy: IfNotPresent\n"
)

// The stand-in refuses each config local-path-provisioner refuses, with its
// words (rancher/local-path-provisioner provisioner.go@v0.0.36
// canonicalizeConfig).
func TestConfigIsCheckedAsUpstreamChecksIt(t *testing.T) {
	for js, want := range map[string]string{
		`{"nodePathMap":[{"node":"a","paths":["rel"]}]}`:                            "path must start with /",
		`{"nodePathMap":[{"node":"a","paths":["/"]}]}`:                              "cannot use root",
		`{"nodePathMap":[{"node":"a","paths":["/x","/x/"]}]}`:                       "duplicate path",
		`{"nodePathMap":[{"node":"a","paths":["/x"]},{"node":"a","paths":["/y"]}]}`: "duplicate node",
	} {
		d, err := readConfig(js)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := canonicalize(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", js, err, want)
		}
	}
	d, _ := readConfig(k3sConfig)
	c, err := canonicalize(d)
	if err != nil || c.cmdTimeoutSeconds != 120 {
		t.Fatalf("k3s's config: %+v %v", c, err)
	}
	if p, err := pathOnNode(&c.classConfig, "k3d-x-agent-0", ""); err != nil || p != "/var/lib/rancher/k3s/storage" {
		t.Errorf("any node's path: %q %v", p, err)
	}
	if _, err := pathOnNode(&c.classConfig, "n", "/elsewhere"); err == nil {
		t.Error("a nodePath parameter the config does not list was taken")
	}
	both := classConfig{sharedFS: "/shared", nodePaths: map[string]map[string]bool{"a": {"/x": true}}}
	if _, err := both.shared(); err == nil {
		t.Error("nodePathMap and sharedFileSystemPath together were accepted")
	}
}

// k3s's helper pod passes, and each field upstream refuses in a helper pod
// template is refused unless unsafe templates are allowed
// (rancher/local-path-provisioner util.go@v0.0.36).
func TestHelperPodTemplateRefusals(t *testing.T) {
	if _, err := parseHelperPod(k3sHelper, false); err != nil {
		t.Fatalf("k3s's template: %v", err)
	}
	for extra, want := range map[string]string{
		"  hostNetwork: true\n":                          "host namespaces",
		"  serviceAccountName: admin\n":                  "serviceAccountName",
		"  nodeName: n1\n":                               "spec.nodeName",
		"    securityContext:\n      privileged: true\n": "privileged",
	} {
		y := k3sHelper + extra
		if strings.HasPrefix(extra, "    ") {
			y = strings.Replace(k3sHelper, "    imagePullPolicy: IfNotPresent\n", "    imagePullPolicy: IfNotPresent\n"+extra, 1)
		}
		if _, err := parseHelperPod(y, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", extra, err, want)
		}
		if _, err := parseHelperPod(y, true); err != nil {
			t.Errorf("%q with unsafe templates allowed: %v", extra, err)
		}
	}
}

// A pathPattern outside <namespace>/<claim>/ is refused
// (rancher/local-path-provisioner provisioner.go@v0.0.36 pathFromPattern).
func TestPathPattern(t *testing.T) {
	opts := pvController.ProvisionOptions{PVName: "pvc-1", PVC: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}}}
	if p, err := folderFromPattern("{{ .PVC.Namespace }}/{{ .PVC.Name }}/{{ .PVName }}", opts, false); err != nil || p != "ns/data/pvc-1" {
		t.Errorf("pattern: %q %v", p, err)
	}
	if _, err := folderFromPattern("{{ .PVName }}", opts, false); err == nil {
		t.Error("a pattern outside <namespace>/<claim>/ was accepted")
	}
}

// Provision runs the setup helper on the claim's node and returns a
// hostPath PV pinned to it; Delete runs teardown there.
func TestProvisionAndDelete(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Labels: map[string]string{"kubernetes.io/hostname": "agent-0"}}})
	var helpers []*corev1.Pod
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Status.Phase = corev1.PodSucceeded // kubelet ran the script
		helpers = append(helpers, pod.DeepCopy())
		return false, nil, nil
	})
	p, err := newProvisioner(t.Context(), cs, k3sConfig, "kube-system", "local-path-provisioner-service-account", "local-path-config", k3sHelper, false)
	if err != nil {
		t.Fatal(err)
	}
	del := corev1.PersistentVolumeReclaimDelete
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{"defaultVolumeType": "local"}},
		Provisioner: "rancher.io/local-path", ReclaimPolicy: &del}
	fsMode := corev1.PersistentVolumeFilesystem
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "job", Name: "disk"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fsMode,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	node, _ := cs.CoreV1().Nodes().Get(context.Background(), "agent-0", metav1.GetOptions{})
	pv, state, err := p.Provision(context.Background(), pvController.ProvisionOptions{StorageClass: class, PVName: "pvc-123", PVC: pvc, SelectedNode: node})
	if err != nil || state != pvController.ProvisioningFinished {
		t.Fatalf("provision: %v %v", state, err)
	}
	const dir = "/var/lib/rancher/k3s/storage/pvc-123_job_disk"
	if pv.Spec.Local == nil || pv.Spec.Local.Path != dir || pv.Spec.PersistentVolumeReclaimPolicy != del || pv.Annotations[selectedNodeAnnotation] != "agent-0" {
		t.Errorf("PV %+v", pv)
	}
	if v := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; v.Key != "kubernetes.io/hostname" || !slices.Equal(v.Values, []string{"agent-0"}) {
		t.Errorf("node affinity %+v", v)
	}
	if len(helpers) != 1 {
		t.Fatalf("%d helper pods", len(helpers))
	}
	h := helpers[0]
	c := h.Spec.Containers[0]
	if h.Name != "helper-pod-create-pvc-123" || h.Namespace != "kube-system" || h.Spec.NodeName != "agent-0" || h.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		!slices.Equal(c.Command, []string{"/bin/sh", "/script/setup"}) || !slices.Contains(c.Args, "create") {
		t.Errorf("helper pod %s/%s on %s: %v %v", h.Namespace, h.Name, h.Spec.NodeName, c.Command, c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["VOL_DIR"] != dir || env["VOL_MODE"] != "Filesystem" || env["VOL_SIZE_BYTES"] != "1073741824" {
		t.Errorf("helper env %v", env)
	}
	if h.Spec.Volumes[0].HostPath == nil || h.Spec.Volumes[0].HostPath.Path != "/var/lib/rancher/k3s/storage/" {
		t.Errorf("helper volumes %+v", h.Spec.Volumes)
	}
	if pods, _ := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("helper pod left behind: %d", len(pods.Items))
	}

	pv.Spec.StorageClassName = "local-path"
	if err := p.Delete(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if len(helpers) != 2 || helpers[1].Name != "helper-pod-delete-pvc-123" || !slices.Equal(helpers[1].Spec.Containers[0].Command, []string{"/bin/sh", "/script/teardown"}) {
		t.Errorf("teardown helper %+v", helpers[len(helpers)-1].Name)
	}

	// A claim other nodes could mount is not this provisioner's.
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if _, _, err := p.Provision(context.Background(), pvController.ProvisionOptions{StorageClass: class, PVName: "pvc-9", PVC: pvc, SelectedNode: node}); err == nil {
		t.Error("ReadWriteMany on node paths was provisioned")
	}
}
