package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// testManifest stands in for the Tigera operator manifest: a namespace, a
// CRD, an empty document and a Deployment whose image must be mirrored.
const testManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
---
---
apiVersion: apiextensions.k8s.io/v1
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
        image: quay.io/tigera/operator:v1.36.0
`

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// manifestServer serves body and counts requests.
func manifestServer(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/manifests/tigera-operator.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestCalicoManifestGoodChecksumIsCached(t *testing.T) {
	srv, hits := manifestServer(t, testManifest)
	cache := t.TempDir()
	c := CalicoOptions{URL: srv.URL + "/manifests/tigera-operator.yaml", SHA256: sha(testManifest), CacheDir: cache, HTTPClient: srv.Client()}
	got, err := CalicoManifest(t.Context(), c)
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
	got, err = CalicoManifest(t.Context(), c)
	if err != nil || string(got) != testManifest || hits.Load() != 1 {
		t.Fatalf("second fetch: err %v, %d hits", err, hits.Load())
	}
	// A corrupted cache entry is not trusted: it is re-downloaded and replaced.
	if err := os.WriteFile(cached, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = CalicoManifest(t.Context(), c)
	if err != nil || string(got) != testManifest || hits.Load() != 2 {
		t.Fatalf("after tampering: err %v, %d hits", err, hits.Load())
	}
	if b, _ := os.ReadFile(cached); string(b) != testManifest {
		t.Fatal("tampered cache entry not replaced")
	}
}

func TestCalicoManifestWrongChecksumRefused(t *testing.T) {
	srv, _ := manifestServer(t, testManifest+"# injected\n")
	cache := t.TempDir()
	c := CalicoOptions{URL: srv.URL + "/manifests/tigera-operator.yaml", SHA256: sha(testManifest), CacheDir: cache, HTTPClient: srv.Client()}
	_, err := CalicoManifest(t.Context(), c)
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
	srv, _ := manifestServer(t, testManifest)
	c := CalicoOptions{URL: srv.URL + "/missing.yaml", SHA256: sha(testManifest), HTTPClient: srv.Client()}
	if _, err := CalicoManifest(t.Context(), c); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want HTTP 404 error, got %v", err)
	}
}

func TestCalicoManifestFileOverride(t *testing.T) {
	srv, hits := manifestServer(t, testManifest)
	f := filepath.Join(t.TempDir(), "tigera-operator.yaml")
	if err := os.WriteFile(f, []byte(testManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	c := CalicoOptions{ManifestFile: f, URL: srv.URL + "/manifests/tigera-operator.yaml", SHA256: sha(testManifest), HTTPClient: srv.Client()}
	got, err := CalicoManifest(t.Context(), c)
	if err != nil || string(got) != testManifest || hits.Load() != 0 {
		t.Fatalf("override: err %v, %d network hits", err, hits.Load())
	}
	if err := os.WriteFile(f, []byte(testManifest+"x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CalicoManifest(t.Context(), c); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("modified override file accepted: %v", err)
	}
}

func TestCalicoPlaceholderChecksumRefused(t *testing.T) {
	srv, hits := manifestServer(t, testManifest)
	c := CalicoOptions{URL: srv.URL + "/manifests/tigera-operator.yaml", HTTPClient: srv.Client()}
	_, err := CalicoManifest(t.Context(), c)
	if err == nil || !strings.Contains(err.Error(), "CalicoOperatorManifestSHA256") || hits.Load() != 0 {
		t.Fatalf("unpinned checksum: err %v, %d hits", err, hits.Load())
	}
}

func TestCalicoObjects(t *testing.T) {
	srv, _ := manifestServer(t, testManifest)
	o := defaultTestOptions()
	o.CNI = CNICalico
	o.ImageRegistryMirror = "mirror.example:5000"
	o.Calico = CalicoOptions{URL: srv.URL + "/manifests/tigera-operator.yaml", SHA256: sha(testManifest), HTTPClient: srv.Client()}
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
	if !contains(allImages(objs), "mirror.example:5000/tigera/operator:v1.36.0") {
		t.Errorf("operator image not mirrored: %v", allImages(objs))
	}
	if objs[0].GetKind() != "Namespace" {
		t.Errorf("first object %s", objs[0].GetKind())
	}
}
