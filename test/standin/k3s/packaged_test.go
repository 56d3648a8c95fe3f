package main

import (
	"context"
	"encoding/json"
	"maps"
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
	"github.com/sriov-lane/sriov-lane/test/bound"
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

// NodeHosts as k3s-io/k3s pkg/node/controller.go@v1.35.5+k3s1
// updateCoreDNSConfigMap keeps it (read at 6a4781ad).
func TestNodeHosts(t *testing.T) {
	server := hostsNode{name: "k3d-a-server-0", names: "k3d-a-server-0", ipv4: "172.18.0.2"}
	h, changed := nodeHosts("", server, false)
	if !changed || h != "172.18.0.2 k3d-a-server-0\n" {
		t.Errorf("first node: %q %v", h, changed)
	}
	k3d := "172.18.0.1 host.k3d.internal\n172.18.0.2 k3d-a-server-0\n"
	if _, changed := nodeHosts(k3d, server, false); changed {
		t.Error("a line already right was rewritten")
	}
	agent := hostsNode{name: "k3d-a-agent-0", names: "k3d-a-agent-0", ipv4: "172.18.0.10"}
	h, _ = nodeHosts(k3d, agent, false)
	if h != k3d+"172.18.0.10 k3d-a-agent-0\n" {
		t.Errorf("added, sorted by address as bytes, not as text: %q", h)
	}
	h, changed = nodeHosts(h, agent, true)
	if !changed || h != k3d {
		t.Errorf("removed: %q %v", h, changed)
	}
	if _, changed := nodeHosts(k3d, hostsNode{name: "gone", names: "gone"}, true); changed {
		t.Error("removing a node that has no line changed NodeHosts")
	}
	// A node's stale address goes; lines are keyed by address (the later
	// wins), cut at "#", and kept with all their names; a one-field line
	// goes.
	in := "172.18.0.9 k3d-a-server-0\n172.18.0.1 a # b\n172.18.0.1 host.k3d.internal registry.local\nlonely\n"
	h, _ = nodeHosts(in, server, false)
	if want := "172.18.0.1 host.k3d.internal registry.local\n172.18.0.2 k3d-a-server-0\n"; h != want {
		t.Errorf("k3d's lines with a stale address: %q, want %q", h, want)
	}
	// A dual node: one entry per family, IPv4 before IPv6 (ParseIP's
	// 16-byte form of an IPv4 address starts with ::ffff), and its
	// Hostname address named beside its node name when they differ.
	dual := hostsNode{name: "n", names: "n n.example", ipv4: "10.0.0.2", ipv6: "fd00::2"}
	h, _ = nodeHosts("fd00::1 host\n", dual, false)
	if want := "10.0.0.2 n n.example\nfd00::1 host\nfd00::2 n n.example\n"; h != want {
		t.Errorf("dual node: %q, want %q", h, want)
	}
}

// k3d v5.9.0 rewrites coredns.yaml after k3s wrote it: it splits the file
// into YAML documents and sets data.NodeHosts on every ConfigMap, failing
// when a ConfigMap's data is not a map (pkg/client/cluster.go ClusterRun).
func TestStagedManifestsKeepK3dsContract(t *testing.T) {
	p := staged(t, k3sFlags{disable: []string{"traefik", "servicelb", "metrics-server", "runtimes"}})
	entries, _ := os.ReadDir(p.dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{"ccm.yaml", "coredns.yaml", "local-storage.yaml", "rolebindings.yaml"}; !slices.Equal(got, want) {
		t.Errorf("staged %v, want %v (runtimes disabled)", got, want)
	}
	b, objs := readManifest(t, filepath.Join(p.dir, "coredns.yaml"))
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
// k3d-style rewrite of coredns.yaml is applied on the next pass (once: k3s
// goes by the mtime), a file that does not parse leaves its Addon with its
// source, and a component disabled later goes with every object it made,
// its file and its Addon.
func TestPackagedDeploysAsK3sDoes(t *testing.T) {
	cfg := apiserver.StartForTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(2*time.Minute))
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
	// What k3s logs of it, made and then found (a restarted server): both
	// lines have the "Cluster dns configmap" k3d waits for.
	if p.clusterDNSLine != "Cluster dns configmap has been set successfully" {
		t.Errorf("first start logs %q", p.clusterDNSLine)
	}
	if line, err := setClusterDNS(ctx, cs, "10.43.0.10", "cluster.local"); err != nil || line != "Cluster dns configmap already exists" {
		t.Errorf("a restart logs %q, %v", line, err)
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

	// What k3d does once the server logged its DNS line (its file, copied
	// in with a tar header without ModTime, has the Unix epoch for mtime),
	// then what the deploy controller's next pass does with it: the mtime
	// is not the staged file's, so it is applied.
	path := filepath.Join(p.dir, "coredns.yaml")
	k3dRewrite := func(nodeHosts string) {
		t.Helper()
		_, docs := readManifest(t, path)
		var rewritten []byte
		for _, o := range docs {
			if o.GetKind() == "ConfigMap" {
				o.Object["data"].(map[string]any)["NodeHosts"] = nodeHosts
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
		if err := os.Chtimes(path, time.Unix(0, 0), time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	nodeHostsIs := func(want string) {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil || cm.Data["NodeHosts"] != want {
			t.Errorf("NodeHosts %q (%v), want %q", cm.Data["NodeHosts"], err, want)
		}
	}
	// The passes from here are the test's own: start's deployer stops.
	stop()
	d := newDeployer(cs, dyn, p.disabled)
	if err := d.pass(ctx, p.dir, true); err != nil {
		t.Fatal(err)
	}
	k3dRewrite("172.18.0.1 host.k3d.internal\n")
	if err := d.pass(ctx, p.dir, false); err != nil {
		t.Fatal(err)
	}
	nodeHostsIs("172.18.0.1 host.k3d.internal\n")
	// Written again with the same mtime, the file is not applied again:
	// k3s goes by the mtime alone.
	k3dRewrite("172.18.0.1 host.k3d.internal\n172.18.0.9 other\n")
	if err := d.pass(ctx, p.dir, false); err != nil {
		t.Fatal(err)
	}
	nodeHostsIs("172.18.0.1 host.k3d.internal\n")

	// A file that does not parse leaves a new Addon with its source and
	// no checksum: k3s creates the Addon, source set, before reading.
	broken := filepath.Join(p.dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("kind: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.pass(ctx, p.dir, false); err == nil || !strings.Contains(err.Error(), "failed to process "+broken) {
		t.Errorf("a manifest that does not parse: %v", err)
	}
	if a, err := dyn.Resource(addonGVR).Namespace("kube-system").Get(ctx, "broken", metav1.GetOptions{}); err != nil {
		t.Errorf("Addon of a file that does not parse: %v", err)
	} else if src, _, _ := unstructured.NestedString(a.Object, "spec", "source"); src != broken {
		t.Errorf("Addon broken's spec.source %q, want %s", src, broken)
	} else if _, has, _ := unstructured.NestedString(a.Object, "spec", "checksum"); has {
		t.Error("Addon broken has a checksum")
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}

	// The server restarted with --disable=local-storage.
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

// readManifest reads the manifest at path and its objects, as the deploy
// controller parses them.
func readManifest(t *testing.T, path string) ([]byte, []*unstructured.Unstructured) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, objs
}

// staged is a server's packaged components for flags, staged into a
// directory of the test's as start stages them.
func staged(t *testing.T, flags k3sFlags) *packaged {
	t.Helper()
	p, err := newPackaged(flags)
	if err != nil {
		t.Fatal(err)
	}
	p.dir = t.TempDir()
	p.clusterDNS, p.clusterDomain = []string{"10.43.0.10"}, "cluster.local"
	if err := p.stage(); err != nil {
		t.Fatal(err)
	}
	return p
}

// stagedObjects stages the manifests of a server started with args, as
// start does, and reads each file back as the deploy controller parses it,
// by file name.
func stagedObjects(t *testing.T, args ...string) map[string][]*unstructured.Unstructured {
	t.Helper()
	p := staged(t, mustFlags(t, "server", append([]string{"--disable=traefik,servicelb,metrics-server"}, args...)...))
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, e := range entries {
		_, out[e.Name()] = readManifest(t, filepath.Join(p.dir, e.Name()))
	}
	return out
}

// object is the object of kind and name in objs, or nil.
func object(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// kindNames are objs as Kind/[namespace/]name, in order.
func kindNames(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		n := o.GetName()
		if o.GetNamespace() != "" {
			n = o.GetNamespace() + "/" + n
		}
		out = append(out, o.GetKind()+"/"+n)
	}
	return out
}

// sameField checks that the field at path of o is, as JSON, what want (YAML
// read off k3s's manifest at the tag) is.
func sameField(t *testing.T, o *unstructured.Unstructured, want string, path ...string) {
	t.Helper()
	if o == nil {
		t.Errorf("no object for %v", path)
		return
	}
	got, _, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	var w any
	if err := yaml.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(w)
	if string(gj) != string(wj) {
		t.Errorf("%s %s %v:\n got %s\nwant %s", o.GetKind(), o.GetName(), path, gj, wj)
	}
}

// The tolerations of both packaged Deployments at the tag.
const packagedTolerationsYAML = `
- key: "CriticalAddonsOnly"
  operator: "Exists"
- key: "node-role.kubernetes.io/control-plane"
  operator: "Exists"
  effect: "NoSchedule"
`

// Conformance of what the stand-in k3s stages and deploys as k3s's
// packaged components: one row per manifest or deploy-controller rule,
// each against k3s at the tag (the rows as in TestConformanceWithK3s).
func TestPackagedConformanceWithK3s(t *testing.T) {
	const tag = "@v1.35.5+k3s1 (read at 6a4781ad)"
	checkRows(t, []row{
		{
			input: "manifests/coredns.yaml (staged unless --disable=coredns)",
			src:   "k3s-io/k3s manifests/coredns.yaml" + tag,
			k3s:   "the Corefile forwards last, after importing *.override; the pods tolerate CriticalAddonsOnly and control-plane NoSchedule only, and spread over hosts (required) and zones (preferred)",
			check: func(t *testing.T) {
				objs := stagedObjects(t)["coredns.yaml"]
				cm := object(objs, "ConfigMap", "coredns")
				want := ".:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n      pods insecure\n      fallthrough in-addr.arpa ip6.arpa\n    }\n" +
					"    hosts /etc/coredns/NodeHosts {\n      ttl 60\n      reload 15s\n      fallthrough\n    }\n    prometheus :9153\n    cache 30\n    loop\n    reload\n    loadbalance\n" +
					"    import /etc/coredns/custom/*.override\n    forward . /etc/resolv.conf\n}\nimport /etc/coredns/custom/*.server\n"
				if got, _, _ := unstructured.NestedString(cm.Object, "data", "Corefile"); got != want {
					t.Errorf("Corefile:\n%s\nwant:\n%s", got, want)
				}
				d := object(objs, "Deployment", "coredns")
				sameField(t, d, packagedTolerationsYAML, "spec", "template", "spec", "tolerations")
				sameField(t, d, `
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
  labelSelector:
    matchLabels:
      k8s-app: kube-dns
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      k8s-app: kube-dns
`, "spec", "template", "spec", "topologySpreadConstraints")
				sameField(t, d, "kubernetes.io/os: linux", "spec", "template", "spec", "nodeSelector")
			},
		},
		{
			input: "manifests/local-storage.yaml (staged unless --disable=local-storage)",
			src:   "k3s-io/k3s manifests/local-storage.yaml" + tag,
			k3s:   "local-path-provisioner on Linux nodes only, with the same two tolerations; its ConfigMap's values are the manifest's text, the storage path put in",
			check: func(t *testing.T) {
				objs := stagedObjects(t)["local-storage.yaml"]
				d := object(objs, "Deployment", "local-path-provisioner")
				sameField(t, d, "kubernetes.io/os: linux", "spec", "template", "spec", "nodeSelector")
				sameField(t, d, packagedTolerationsYAML, "spec", "template", "spec", "tolerations")
				cm := object(objs, "ConfigMap", "local-path-config")
				for key, want := range map[string]string{
					"config.json":    "{\n  \"nodePathMap\":[\n  {\n    \"node\":\"DEFAULT_PATH_FOR_NON_LISTED_NODES\",\n    \"paths\":[\"/var/lib/rancher/k3s/storage\"]\n  }\n  ]\n}",
					"helperPod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n  containers:\n  - name: helper-pod\n    image: \"rancher/mirrored-library-busybox:1.37.0\"\n    imagePullPolicy: IfNotPresent",
					"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"${VOL_DIR}\"\nchmod 700 \"${VOL_DIR}/..\"",
					"teardown":       "#!/bin/sh\nset -eu\nrm -rf \"${VOL_DIR}\"",
				} {
					if got, _, _ := unstructured.NestedString(cm.Object, "data", key); got != want {
						t.Errorf("local-path-config %s: %q, want %q", key, got, want)
					}
				}
			},
		},
		{
			input: "manifests/ccm.yaml (staged unless --disable=ccm, or --disable-cloud-controller with --disable=servicelb)",
			src:   "k3s-io/k3s manifests/ccm.yaml" + tag + "; pkg/cli/server/server.go" + tag + " (Skips[\"ccm\"])",
			k3s:   "the embedded cloud-controller-manager's ClusterRole and its three bindings: its ClusterRole, system:auth-delegator and kube-system's extension-apiserver-authentication-reader",
			standin: "--disable-cloud-controller is refused as a flag the stand-in does not know (it runs no cloud controller); " +
				"--disable=ccm skips the file as with k3s",
			check: func(t *testing.T) {
				objs := stagedObjects(t)["ccm.yaml"]
				want := []string{"ClusterRole/k3s-cloud-controller-manager", "ClusterRoleBinding/k3s-cloud-controller-manager",
					"ClusterRoleBinding/k3s-cloud-controller-manager-auth-delegator", "RoleBinding/kube-system/k3s-cloud-controller-manager-authentication-reader"}
				if got := kindNames(objs); !slices.Equal(got, want) {
					t.Errorf("ccm.yaml holds %v, want %v", got, want)
				}
				sameField(t, object(objs, "ClusterRole", "k3s-cloud-controller-manager"), `
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
- apiGroups: [""]
  resources: [nodes]
  verbs: ["*"]
- apiGroups: [""]
  resources: [nodes/status, services/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [services, pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [services]
  verbs: [patch, update]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [create, get]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [create, get]
- apiGroups: [apps]
  resources: [daemonsets]
  verbs: ["*"]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
`, "rules")
				subject := `[{kind: User, name: k3s-cloud-controller-manager, namespace: kube-system}]`
				for _, b := range []struct{ kind, name, ref string }{
					{"ClusterRoleBinding", "k3s-cloud-controller-manager", "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: k3s-cloud-controller-manager}"},
					{"ClusterRoleBinding", "k3s-cloud-controller-manager-auth-delegator", "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}"},
					{"RoleBinding", "k3s-cloud-controller-manager-authentication-reader", "{apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}"},
				} {
					o := object(objs, b.kind, b.name)
					sameField(t, o, b.ref, "roleRef")
					sameField(t, o, subject, "subjects")
				}
				if _, staged := stagedObjects(t, "--disable=ccm")["ccm.yaml"]; staged {
					t.Error("ccm.yaml staged with --disable=ccm")
				}
				if _, err := parseFlags("server", []string{"--disable-cloud-controller"}); err == nil {
					t.Error("--disable-cloud-controller taken, though the stand-in would not act on it")
				}
			},
		},
		{
			input: "manifests/rolebindings.yaml (always staged)",
			src:   "k3s-io/k3s manifests/rolebindings.yaml" + tag,
			k3s:   "kube-apiserver is kubelet-api-admin; User system:k3s-controller gets ClusterRole system:k3s-controller; Group system:nodes may list and watch ClusterCIDRs",
			check: func(t *testing.T) {
				objs := stagedObjects(t)["rolebindings.yaml"]
				want := []string{"ClusterRoleBinding/kube-apiserver-kubelet-admin", "ClusterRole/system:k3s-controller", "ClusterRoleBinding/system:k3s-controller",
					"ClusterRole/clustercidrs-node", "ClusterRoleBinding/clustercidrs-node"}
				if got := kindNames(objs); !slices.Equal(got, want) {
					t.Errorf("rolebindings.yaml holds %v, want %v", got, want)
				}
				sameField(t, object(objs, "ClusterRole", "system:k3s-controller"), `
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [nodes/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies, clustercidrs]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [endpoints, pods]
  verbs: [list, get, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, get, watch]
`, "rules")
				b := object(objs, "ClusterRoleBinding", "system:k3s-controller")
				sameField(t, b, "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:k3s-controller}", "roleRef")
				sameField(t, b, "[{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:k3s-controller}]", "subjects")
				sameField(t, object(objs, "ClusterRole", "clustercidrs-node"), "[{apiGroups: [networking.k8s.io], resources: [clustercidrs], verbs: [list, watch]}]", "rules")
				b = object(objs, "ClusterRoleBinding", "clustercidrs-node")
				sameField(t, b, "{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: clustercidrs-node}", "roleRef")
				sameField(t, b, "[{kind: Group, name: system:nodes, apiGroup: rbac.authorization.k8s.io}]", "subjects")
				sameField(t, object(objs, "ClusterRoleBinding", "kube-apiserver-kubelet-admin"),
					"[{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver}]", "subjects")
			},
		},
		{
			input: "manifests/runtimes.yaml (staged unless --disable=runtimes)",
			src:   "k3s-io/k3s manifests/runtimes.yaml" + tag,
			k3s:   "one RuntimeClass per runtime, its handler its name",
			check: func(t *testing.T) {
				var got []string
				for _, o := range stagedObjects(t)["runtimes.yaml"] {
					if h, _, _ := unstructured.NestedString(o.Object, "handler"); h != o.GetName() || o.GetKind() != "RuntimeClass" {
						t.Errorf("%s %s has handler %q", o.GetKind(), o.GetName(), h)
					}
					got = append(got, o.GetName())
				}
				if want := []string{"nvidia", "nvidia-experimental", "crun", "lunatic", "slight", "spin", "wws", "wasmedge", "wasmer", "wasmtime"}; !slices.Equal(got, want) {
					t.Errorf("RuntimeClasses %v, want %v", got, want)
				}
			},
		},
		{
			input: "--disable=NAME.yaml, --disable with an empty item (server)",
			src:   "k3s-io/k3s pkg/deploy/stage.go" + tag + " Stage; pkg/deploy/controller.go" + tag + " shouldDisableFile",
			k3s: "staging skips a manifest named with or without its extension; the deploy controller deletes a file whose name less its extension is disabled, " +
				"or whose path from the manifests dir, which starts with an empty element, has a disabled directory: an empty item (\"--disable=traefik,\") deletes every file",
			check: func(t *testing.T) {
				if _, staged := stagedObjects(t, "--disable=runtimes.yaml")["runtimes.yaml"]; staged {
					t.Error("runtimes.yaml staged with --disable=runtimes.yaml")
				}
				empty := map[string]bool{"": true}
				for _, path := range []string{"/m/coredns.yaml", "/m/notes.txt", "/m/mine/notes.txt", "/elsewhere/x.yaml"} {
					if !disabledFile("/m", path, empty) {
						t.Errorf("%s kept with an empty --disable item", path)
					}
				}
				if disabledFile("/m", "/m", empty) {
					t.Error("the manifests dir itself disabled")
				}
			},
		},
		{
			input: "a symlink to a directory in the manifests dir",
			src:   "k3s-io/k3s pkg/deploy/controller.go" + tag + " listFilesIn",
			k3s:   "followed: what is under the directory it resolves to is deployed by that path; links in there are not followed",
			check: func(t *testing.T) {
				dir, other := t.TempDir(), t.TempDir()
				for _, f := range []string{filepath.Join(other, "linked", "a.yaml"), filepath.Join(other, "deeper", "b.yaml")} {
					if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(f, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(filepath.Join(other, "linked"), filepath.Join(dir, "extra")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(other, "deeper"), filepath.Join(other, "linked", "deeper")); err != nil {
					t.Fatal(err)
				}
				files, err := manifestFiles(dir)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := files[filepath.Join(other, "linked", "a.yaml")]; !ok {
					t.Errorf("the linked directory's manifest is not listed: %v", slices.Collect(maps.Keys(files)))
				}
				if _, ok := files[filepath.Join(other, "deeper", "b.yaml")]; ok {
					t.Error("a link in the linked directory was followed")
				}
				if err := os.Symlink(filepath.Join(other, "gone"), filepath.Join(dir, "dangling")); err != nil {
					t.Fatal(err)
				}
				if _, err := manifestFiles(dir); err == nil {
					t.Error("a dangling link passed over: k3s fails the listing on it")
				}
			},
		},
		{
			input: "a manifest's mtime (k3d's rewrite of coredns.yaml has the Unix epoch)",
			src:   "k3s-io/k3s pkg/deploy/controller.go" + tag + " listFilesIn; k3d-io/k3d pkg/runtimes/docker/util.go@v5.9.0 WriteToNode (a tar header without ModTime)",
			k3s:   "a file is applied when its mtime is not the one recorded when it was last applied; an mtime of the epoch is no different",
			check: func(t *testing.T) {
				d := &deployer{modTime: map[string]time.Time{}}
				dir := t.TempDir()
				path := filepath.Join(dir, "coredns.yaml")
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				epoch := time.Unix(0, 0)
				if err := os.Chtimes(path, epoch, epoch); err != nil {
					t.Fatal(err)
				}
				info, err := os.Lstat(path)
				if err != nil {
					t.Fatal(err)
				}
				if !d.changed(path, info, false) {
					t.Error("a file never applied is not applied")
				}
				d.modTime[path] = info.ModTime()
				if d.changed(path, info, false) {
					t.Error("a file at the epoch applied again with its mtime unchanged")
				}
				if !d.changed(path, info, true) {
					t.Error("not applied on the forced first pass")
				}
			},
		},
		{
			input: "the CRDs a server registers (no flag; --disable-helm-controller leaves helm-controller's out)",
			src:   "k3s-io/k3s pkg/server/context.go" + tag + " registerCRDs, go.mod" + tag + "; k3s-io/api pkg/crds/yaml/generated@v0.1.4; k3s-io/helm-controller pkg/crds/yaml/generated@v0.17.1",
			k3s:   "Addon and ETCDSnapshotFile (v0.1.4), HelmChart (hc, a status subresource) and HelmChartConfig (hcc), with their printer columns",
			standin: "the schemas of ETCDSnapshotFile, HelmChart and HelmChartConfig keep unknown fields: nothing in a lane writes them; " +
				"--disable-helm-controller is refused as a flag the stand-in does not know",
			check: func(t *testing.T) {
				crds := map[string]*unstructured.Unstructured{}
				for _, c := range k3sCRDs() {
					crds[c.GetName()] = c
				}
				sameField(t, crds["helmchartconfigs.helm.cattle.io"], "[hcc]", "spec", "names", "shortNames")
				sameField(t, crds["helmcharts.helm.cattle.io"], "[hc]", "spec", "names", "shortNames")
				version := func(name string) *unstructured.Unstructured {
					v, _, _ := unstructured.NestedSlice(crds[name].Object, "spec", "versions")
					return &unstructured.Unstructured{Object: v[0].(map[string]any)}
				}
				sameField(t, version("helmcharts.helm.cattle.io"), `
- {jsonPath: .spec.repo, name: Repo, type: string}
- {jsonPath: .spec.chart, name: Chart, type: string}
- {jsonPath: .spec.version, name: Version, type: string}
- {jsonPath: .spec.targetNamespace, name: TargetNamespace, type: string}
- {jsonPath: .spec.bootstrap, name: Bootstrap, type: boolean}
- {jsonPath: ".status.conditions[?(@.type=='Failed')].status", name: Failed, type: string}
- {jsonPath: .status.jobName, name: Job, priority: 10, type: string}
`, "additionalPrinterColumns")
				sameField(t, version("helmcharts.helm.cattle.io"), "{status: {}}", "subresources")
				sameField(t, version("etcdsnapshotfiles.k3s.cattle.io"), `
- {jsonPath: .spec.snapshotName, name: SnapshotName, type: string}
- {jsonPath: .spec.nodeName, name: Node, type: string}
- {jsonPath: .spec.location, name: Location, type: string}
- {jsonPath: .status.size, name: Size, type: string}
- {jsonPath: .status.creationTime, name: CreationTime, type: date}
`, "additionalPrinterColumns")
				sameField(t, version("addons.k3s.cattle.io"), `
- {jsonPath: .spec.source, name: Source, type: string}
- {jsonPath: .spec.checksum, name: Checksum, type: string}
`, "additionalPrinterColumns")
				sameField(t, crds["etcdsnapshotfiles.k3s.cattle.io"], "Cluster", "spec", "scope")
				sameField(t, crds["addons.k3s.cattle.io"], "Namespaced", "spec", "scope")
			},
		},
	})
}
