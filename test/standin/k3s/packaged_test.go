package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/test/apiserver"
)

// The stand-in deploys no traefik, servicelb or metrics-server, so it
// refuses to start with any of them on rather than run without it.
func TestNewPackagedRefusesWhatItCannotDeploy(t *testing.T) {
	if _, err := newPackaged(k3sFlags{disable: []string{"traefik"}}); err == nil || !strings.Contains(err.Error(), "servicelb, metrics-server") {
		t.Errorf("servicelb and metrics-server left on: %v", err)
	}
	p, err := newPackaged(k3sFlags{disable: []string{"traefik", "servicelb", "metrics-server", "local-storage"}})
	if err != nil || !p.disabled["local-storage"] || p.disabled["coredns"] {
		t.Errorf("the lane's set: %v %v", p, err)
	}
}

// The hash wrangler labels an Addon's objects with, against values read
// off a real k3s cluster's objects (its coredns ConfigMap and a runtimes
// RuntimeClass: objectset.rio.cattle.io/hash).
func TestObjectsetHashIsWranglers(t *testing.T) {
	for addon, want := range map[string]string{
		"coredns":  "bce283298811743a0386ab510f2f67ef74240c57",
		"runtimes": "57231bea9658cf25fcdac23f1c5685ac7bbcf983",
	} {
		ann, hash := objectsetLabels(addon)
		if hash != want || ann[objectsetOwnerGVK] != "k3s.cattle.io/v1, Kind=Addon" || ann[objectsetOwnerNS] != "kube-system" {
			t.Errorf("%s: hash %s (want %s), annotations %v", addon, hash, want, ann)
		}
	}
}

func TestDeployFileRules(t *testing.T) {
	dis := map[string]bool{"local-storage": true, "metrics-server": true}
	for path, want := range map[string]bool{
		"/m/local-storage.yaml":              true,
		"/m/local-storage.json":              true,
		"/m/local-storage.yaml.bak":          false,
		"/m/metrics-server/deployment.yaml":  true,
		"/m/metrics-server/notes.txt":        true,
		"/m/coredns.yaml":                    false,
		"/m/mine/local-storage-extra.yaml":   false,
		"/m/metrics-server-extra/thing.yaml": false,
	} {
		if got := disabledFile("/m", path, dis); got != want {
			t.Errorf("disabledFile(%s) = %v", path, got)
		}
	}
	skips := map[string]bool{"mine.yaml": true}
	for name, want := range map[string]bool{"mine.yaml": true, ".hidden.yaml": true, "notes.txt": true, "x.YML": false, "y.json": false} {
		if got := skipFile(name, skips); got != want {
			t.Errorf("skipFile(%s) = %v", name, got)
		}
	}
	if addonName("/m/coredns.yaml") != "coredns" || addonName("/m/a.b.yaml") != "a" {
		t.Error("an Addon is named after the file up to its first dot")
	}
}

func TestNodeHosts(t *testing.T) {
	h, changed := nodeHosts("", "k3d-a-server-0", "172.18.0.2", false)
	if !changed || h != "172.18.0.2 k3d-a-server-0\n" {
		t.Errorf("first node: %q %v", h, changed)
	}
	k3d := "172.18.0.1 host.k3d.internal\n172.18.0.2 k3d-a-server-0\n"
	if _, changed := nodeHosts(k3d, "k3d-a-server-0", "172.18.0.2", false); changed {
		t.Error("a line already right was rewritten")
	}
	h, _ = nodeHosts(k3d, "k3d-a-agent-0", "172.18.0.3", false)
	if h != k3d+"172.18.0.3 k3d-a-agent-0\n" {
		t.Errorf("added: %q", h)
	}
	h, changed = nodeHosts(h, "k3d-a-agent-0", "", true)
	if !changed || h != k3d {
		t.Errorf("removed: %q %v", h, changed)
	}
	if _, changed := nodeHosts(k3d, "gone", "", true); changed {
		t.Error("removing a node that has no line changed NodeHosts")
	}
}

// k3d v5.9.0 rewrites coredns.yaml after k3s wrote it: it splits the file
// into YAML documents and sets data.NodeHosts on every ConfigMap, failing
// when a ConfigMap's data is not a map (pkg/client/cluster.go ClusterRun).
func TestStagedManifestsKeepK3dsContract(t *testing.T) {
	p, err := newPackaged(k3sFlags{disable: []string{"traefik", "servicelb", "metrics-server", "runtimes"}})
	if err != nil {
		t.Fatal(err)
	}
	p.dir = t.TempDir()
	p.clusterDNS, p.clusterDomain = []string{"10.43.0.10"}, "cluster.local"
	if err := p.stage(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(p.dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{"ccm.yaml", "coredns.yaml", "local-storage.yaml", "rolebindings.yaml"}; !slices.Equal(got, want) {
		t.Errorf("staged %v, want %v (runtimes disabled)", got, want)
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "coredns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "ConfigMap" {
			if _, ok := o.Object["data"].(map[string]any); !ok {
				t.Errorf("ConfigMap data is %T: k3d refuses it", o.Object["data"])
			}
			if _, has := o.Object["data"].(map[string]any)["NodeHosts"]; has {
				t.Error("NodeHosts in the manifest: k3s's has none, the node controller and k3d add it")
			}
		}
		if o.GetKind() == "Service" {
			if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != "10.43.0.10" {
				t.Errorf("kube-dns clusterIP %q", ip)
			}
		}
	}
	for _, want := range []string{"ServiceAccount/coredns", "ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns", "ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("coredns.yaml lacks %s: %v", want, kinds)
		}
	}
	for _, d := range strings.Split(string(b), "\n---\n") {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			t.Errorf("a document k3d cannot read: %v", err)
		}
	}
}

// Against a real kube-apiserver: start registers k3s's CRDs, stages the
// manifests and the deploy controller applies them with their Addons; a
// k3d-style rewrite of coredns.yaml is applied on the next pass, and a
// component disabled later goes with every object it made, its file and
// its Addon.
func TestPackagedDeploysAsK3sDoes(t *testing.T) {
	cfg := apiserver.StartForTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	for {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	p, err := newPackaged(k3sFlags{disable: []string{"traefik", "servicelb", "metrics-server"}})
	if err != nil {
		t.Fatal(err)
	}
	p.dir = t.TempDir()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := p.start(pctx, cfg, []string{"10.43.0.10"}, "cluster.local"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"addons.k3s.cattle.io", "etcdsnapshotfiles.k3s.cattle.io", "helmcharts.helm.cattle.io", "helmchartconfigs.helm.cattle.io"} {
		if _, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}
	if cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-dns", metav1.GetOptions{}); err != nil || cm.Data["clusterDNS"] != "10.43.0.10" {
		t.Errorf("cluster-dns: %v %v", cm, err)
	}

	eventually := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not in time", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	eventually("the default StorageClass", func() bool {
		sc, err := cs.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{})
		return err == nil && sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" && sc.Provisioner == "rancher.io/local-path"
	})
	eventually("the coredns Deployment", func() bool {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		return err == nil && d.Labels["k8s-app"] == "kube-dns" && d.Spec.Template.Spec.Containers[0].Image == corednsImage &&
			d.Annotations[objectsetOwnerName] == "coredns" && d.Labels[objectsetHash] == "bce283298811743a0386ab510f2f67ef74240c57"
	})
	for _, n := range []string{"ccm", "coredns", "local-storage", "rolebindings", "runtimes"} {
		eventually("Addon "+n, func() bool {
			a, err := dyn.Resource(addonGVR).Namespace("kube-system").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false // not made yet: the deploy controller's pass is still running
			}
			sum, _, _ := unstructured.NestedString(a.Object, "spec", "checksum")
			src, _, _ := unstructured.NestedString(a.Object, "spec", "source")
			return len(sum) == 64 && src == filepath.Join(p.dir, n+".yaml")
		})
	}

	// What k3d does once the server logged its DNS line, then what the
	// deploy controller's next pass does with it.
	path := filepath.Join(p.dir, "coredns.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := parseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	var rewritten []byte
	for _, o := range docs {
		if o.GetKind() == "ConfigMap" {
			o.Object["data"].(map[string]any)["NodeHosts"] = "172.18.0.1 host.k3d.internal\n"
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		rewritten = append(append(rewritten, "---\n"...), y...)
	}
	if err := os.WriteFile(path, rewritten, 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	d := newDeployer(cs, dyn, p.disabled)
	if err := d.pass(ctx, p.dir, false); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["NodeHosts"], "host.k3d.internal") {
		t.Errorf("k3d's NodeHosts not applied: %v %v", cm.Data, err)
	}

	// The server restarted with --disable=local-storage.
	stop()
	d.disabled = map[string]bool{"local-storage": true}
	if err := d.pass(ctx, p.dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("StorageClass of a disabled component: %v", err)
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "local-path-provisioner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment of a disabled component: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "local-storage.yaml")); !os.IsNotExist(err) {
		t.Errorf("manifest of a disabled component: %v", err)
	}
	if _, err := dyn.Resource(addonGVR).Namespace("kube-system").Get(ctx, "local-storage", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Addon of a disabled component: %v", err)
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("coredns went with local-storage: %v", err)
	}
}
