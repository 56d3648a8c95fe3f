package cni

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// testCRDs and testOperator stand in for the pinned operator-crds.yaml
// and tigera-operator.yaml: CRDs first (with an empty document), then a
// namespace and a Deployment whose image must be mirrored.
const testCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: installations.operator.tigera.io
spec:
  group: operator.tigera.io
  names: {kind: Installation, plural: installations, singular: installation, listKind: InstallationList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: tigerastatuses.operator.tigera.io
spec:
  group: operator.tigera.io
  names: {kind: TigeraStatus, plural: tigerastatuses, singular: tigerastatus, listKind: TigeraStatusList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

const testOperator = `apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: tigera-operator
  namespace: tigera-operator
spec:
  selector: {matchLabels: {name: tigera-operator}}
  template:
    metadata: {labels: {name: tigera-operator}}
    spec:
      containers:
      - name: tigera-operator
        image: quay.io/tigera/operator:v1.42.3
`

// testManifest is the single-file case of the cache and checksum tests.
const testManifest = testOperator

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func ref(name, body string) ManifestRef {
	return ManifestRef{Name: name, SHA256: sha(body), Size: int64(len(body))}
}

// manifestServer serves the bodies under /manifests/<name> and counts
// requests.
func manifestServer(t *testing.T, bodies map[string]string) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, ok := bodies[strings.TrimPrefix(r.URL.Path, "/manifests/")]
		if !ok || !strings.HasPrefix(r.URL.Path, "/manifests/") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// testCalicoOptions points at a server holding both test manifests.
func testCalicoOptions(t *testing.T) (CalicoOptions, *atomic.Int32) {
	srv, hits := manifestServer(t, map[string]string{"operator-crds.yaml": testCRDs, "tigera-operator.yaml": testOperator})
	return CalicoOptions{
		BaseURL:    srv.URL + "/manifests/",
		Manifests:  []ManifestRef{ref("operator-crds.yaml", testCRDs), ref("tigera-operator.yaml", testOperator)},
		HTTPClient: srv.Client(),
	}, hits
}

func singleManifest(t *testing.T, body string) (CalicoOptions, ManifestRef, *atomic.Int32) {
	srv, hits := manifestServer(t, map[string]string{"tigera-operator.yaml": body})
	return CalicoOptions{BaseURL: srv.URL + "/manifests/", HTTPClient: srv.Client()}, ref("tigera-operator.yaml", testManifest), hits
}

// The pinned release is one Calico tests on the default k3s minor, and its
// two files are pinned by the sha256 and size of their git blobs at the tag
// (computed with git show TAG:PATH | sha256sum).
func TestCalicoPinnedRelease(t *testing.T) {
	if CalicoVersion != "v3.32.1" {
		t.Fatalf("CalicoVersion %s: re-check the tested Kubernetes range and the digests below", CalicoVersion)
	}
	want := []ManifestRef{
		// projectcalico/calico manifests/operator-crds.yaml@v3.32.1
		{Name: "operator-crds.yaml", SHA256: "192f8b2d934ef24b62e86b7e1a6e1762d1c8af26a916f78057bc13fa5ed60f71", Size: 3046956},
		// projectcalico/calico manifests/tigera-operator.yaml@v3.32.1
		{Name: "tigera-operator.yaml", SHA256: "f18e073794207d372606bc3ea6f8fd73972f86d6828f4ba666dfe0d4aa8ab07f", Size: 19660},
	}
	if len(CalicoManifests) != len(want) {
		t.Fatalf("CalicoManifests = %v", CalicoManifests)
	}
	for i := range want {
		if CalicoManifests[i] != want[i] {
			t.Errorf("manifest %d = %+v, want %+v (CRDs must come first)", i, CalicoManifests[i], want[i])
		}
	}
	if got := CalicoManifestBaseURL; got != "https://raw.githubusercontent.com/projectcalico/calico/v3.32.1/manifests/" {
		t.Errorf("base URL %s", got)
	}
}

func TestCalicoManifestGoodChecksumIsCached(t *testing.T) {
	c, r, hits := singleManifest(t, testManifest)
	cache := t.TempDir()
	c.CacheDir = cache
	got, err := CalicoManifest(t.Context(), c, r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != testManifest || hits.Load() != 1 {
		t.Fatalf("first fetch: %d hits, %d bytes", hits.Load(), len(got))
	}
	cached := filepath.Join(cache, "calico", sha(testManifest)+".yaml")
	if b, err := os.ReadFile(cached); err != nil || string(b) != testManifest {
		t.Fatalf("cache file %s: %v", cached, err)
	}
	// Second call is served from the cache: the server is not asked again.
	got, err = CalicoManifest(t.Context(), c, r)
	if err != nil || string(got) != testManifest || hits.Load() != 1 {
		t.Fatalf("second fetch: err %v, %d hits", err, hits.Load())
	}
	// A corrupted cache entry is not trusted: it is re-downloaded and replaced.
	if err := os.WriteFile(cached, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = CalicoManifest(t.Context(), c, r)
	if err != nil || string(got) != testManifest || hits.Load() != 2 {
		t.Fatalf("after tampering: err %v, %d hits", err, hits.Load())
	}
	if b, _ := os.ReadFile(cached); string(b) != testManifest {
		t.Fatal("tampered cache entry not replaced")
	}
}

func TestCalicoManifestWrongChecksumRefused(t *testing.T) {
	c, r, _ := singleManifest(t, testManifest+"# injected\n")
	cache := t.TempDir()
	c.CacheDir = cache
	_, err := CalicoManifest(t.Context(), c, r)
	if !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("want checksum mismatch, got %v", err)
	}
	if !strings.Contains(err.Error(), sha(testManifest)) {
		t.Errorf("error does not name the pinned digest: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "calico")); len(entries) != 0 {
		t.Fatalf("refused manifest was cached: %v", entries)
	}
}

func TestCalicoManifestHTTPError(t *testing.T) {
	c, r, _ := singleManifest(t, testManifest)
	r.Name = "missing.yaml"
	if _, err := CalicoManifest(t.Context(), c, r); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want HTTP 404 error, got %v", err)
	}
}

func TestCalicoManifestDirOverride(t *testing.T) {
	c, r, hits := singleManifest(t, testManifest)
	c.ManifestDir = t.TempDir()
	f := filepath.Join(c.ManifestDir, "tigera-operator.yaml")
	if err := os.WriteFile(f, []byte(testManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := CalicoManifest(t.Context(), c, r)
	if err != nil || string(got) != testManifest || hits.Load() != 0 {
		t.Fatalf("override: err %v, %d network hits", err, hits.Load())
	}
	if err := os.WriteFile(f, []byte(testManifest+"x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CalicoManifest(t.Context(), c, r); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("modified override file accepted: %v", err)
	}
}

func TestCalicoBadPinnedChecksumRefused(t *testing.T) {
	c, r, hits := singleManifest(t, testManifest)
	r.SHA256 = "not-a-digest"
	_, err := CalicoManifest(t.Context(), c, r)
	if err == nil || !strings.Contains(err.Error(), "not a sha256 hex digest") || hits.Load() != 0 {
		t.Fatalf("bad pinned checksum: err %v, %d hits", err, hits.Load())
	}
}

// Offline (plan), nothing is downloaded: what is cached is used, the rest
// is reported with its URL, digest and size.
func TestCalicoOffline(t *testing.T) {
	c, hits := testCalicoOptions(t)
	c.CacheDir = t.TempDir()
	c.Offline = true
	o := defaultTestOptions()
	o.CNI = config.CNICalico
	o.Calico = c
	cs, err := Components(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	objs, pending := Flatten(cs)
	if hits.Load() != 0 {
		t.Fatalf("offline plan downloaded %d times", hits.Load())
	}
	if len(pending) != 2 || pending[0].URL != c.BaseURL+"operator-crds.yaml" || pending[0].SHA256 != sha(testCRDs) || pending[1].Size != int64(len(testOperator)) {
		t.Fatalf("pending = %+v", pending)
	}
	if objs[len(objs)-1].GetKind() != "Installation" {
		t.Errorf("the lane's own Installation is missing offline")
	}
	if _, err := Objects(t.Context(), o); !errors.Is(err, ErrNotCached) {
		t.Errorf("Objects with pending manifests: %v", err)
	}
	// Once up has cached them, the offline plan shows their objects.
	c.Offline = false
	if _, err := CalicoManifest(t.Context(), c, c.Manifests[0]); err != nil {
		t.Fatal(err)
	}
	c.Offline = true
	o.Calico = c
	cs, err = Components(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	objs, pending = Flatten(cs)
	if len(pending) != 1 || pending[0].URL != c.BaseURL+"tigera-operator.yaml" {
		t.Fatalf("pending after caching the CRDs = %+v", pending)
	}
	if objs[0].GetKind() != "CustomResourceDefinition" {
		t.Errorf("cached CRDs not shown: first object %s", objs[0].GetKind())
	}
}

func TestCalicoObjects(t *testing.T) {
	o := defaultTestOptions()
	o.CNI = config.CNICalico
	// A plain-HTTP mirror: the scheme is the nodes' registries.yaml's, not
	// part of the registry the operator joins image paths to.
	o.ImageRegistryMirror = "http://mirror.example:5000"
	o.Calico, _ = testCalicoOptions(t)
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var inst *unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "Installation" {
			inst = u
		}
		if u.GetKind() == "DaemonSet" && u.GetName() == flannelDaemonSet {
			t.Error("flannel deployed with calico")
		}
	}
	if inst == nil || objs[len(objs)-1] != inst {
		t.Fatal("Installation missing or not applied last (after its CRD)")
	}
	fwd, _, _ := unstructured.NestedString(inst.Object, "spec", "calicoNetwork", "containerIPForwarding")
	pools, _, _ := unstructured.NestedSlice(inst.Object, "spec", "calicoNetwork", "ipPools")
	reg, _, _ := unstructured.NestedString(inst.Object, "spec", "registry")
	if fwd != "Enabled" || len(pools) != 1 || pools[0].(map[string]any)["cidr"] != "192.168.0.0/16" || reg != "mirror.example:5000/" {
		t.Errorf("Installation spec: %v", inst.Object["spec"])
	}
	if !slices.Contains(allImages(objs), "mirror.example:5000/tigera/operator:v1.42.3") {
		t.Errorf("operator image not mirrored: %v", allImages(objs))
	}
	if objs[0].GetKind() != "Namespace" {
		t.Errorf("first object %s", objs[0].GetKind())
	}
}

// WaitCalico fails in time naming the TigeraStatus conditions and the
// calico-node DaemonSet, and returns once the operator reports Available.
func TestWaitCalico(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, cs := startAPI(t)
	crds, err := DecodeManifest([]byte(testCRDs))
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), crds, log.Noop); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := waitCRDEstablished(t.Context(), dyn, "tigerastatuses.operator.tigera.io"); err != nil {
		t.Fatal(err)
	}
	ts := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.tigera.io/v1", "kind": "TigeraStatus",
		"metadata": map[string]any{"name": "calico"},
	}}
	if _, err := dyn.Resource(tigeraStatusGVR).Create(t.Context(), ts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setConditions := func(conds ...map[string]any) {
		t.Helper()
		u, err := dyn.Resource(tigeraStatusGVR).Get(t.Context(), "calico", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
		if _, err := dyn.Resource(tigeraStatusGVR).UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setConditions(
		map[string]any{"type": "Available", "status": "False", "reason": "ResourceNotReady", "message": "Waiting for calico-node"},
		map[string]any{"type": "Degraded", "status": "True", "reason": "PodFailure", "message": "calico-node is crash looping"},
	)
	wait := func(ctx context.Context) error { return WaitCalico(ctx, cs, dyn) }
	assertFailsInTime(t, wait, "tigerastatus calico", "Available=False ResourceNotReady", "calico-node is crash looping", "calico-system/calico-node: not found")

	done := runWait(t, wait)
	expectPending(t, done)
	setConditions(map[string]any{"type": "Available", "status": "True", "reason": "AllObjectsAvailable", "message": "All objects are available"})
	expectDone(t, done)
}
