package cni

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// CalicoVersion is the pinned Calico release deployed through the Tigera operator.
const CalicoVersion = "v3.29.0"

// CalicoOperatorManifestURL is the pinned upstream operator manifest.
const CalicoOperatorManifestURL = "https://raw.githubusercontent.com/projectcalico/calico/" + CalicoVersion + "/manifests/tigera-operator.yaml"

// CalicoOperatorManifestSHA256 pins the manifest at CalicoOperatorManifestURL.
//
// UNVERIFIED PLACEHOLDER: the build machine has no Internet access, so the
// real digest could not be computed. On a networked machine run
//
//	curl -fsSL <CalicoOperatorManifestURL> | sha256sum
//
// and put the 64-hex-digit result here. Until then every Calico manifest
// (download, cache or file override) is refused with an error saying so:
// failing closed is the point of pinning.
const CalicoOperatorManifestSHA256 = "UNVERIFIED-set-sha256-of-tigera-operator-v3.29.0-yaml"

// maxManifestBytes bounds a download; the real manifest is a few MiB of CRDs.
const maxManifestBytes = 64 << 20

// ErrChecksumMismatch is returned (wrapped) when manifest bytes do not hash
// to the pinned digest.
var ErrChecksumMismatch = errors.New("sha256 mismatch")

// CalicoManifest returns the verified Tigera operator manifest: from
// c.ManifestFile when set (air-gapped hosts), else from the cache in
// c.CacheDir, else downloaded from c.URL and then cached. Every source is
// checked against c.SHA256; a cached copy that fails is replaced.
func CalicoManifest(ctx context.Context, c CalicoOptions) ([]byte, error) {
	if c.URL == "" {
		c.URL = CalicoOperatorManifestURL
	}
	if c.SHA256 == "" {
		c.SHA256 = CalicoOperatorManifestSHA256
	}
	want := strings.ToLower(c.SHA256)
	if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("pinned Calico manifest checksum %q is not a sha256 hex digest: set CalicoOperatorManifestSHA256 from a networked machine", c.SHA256)
	}
	if c.ManifestFile != "" {
		data, err := os.ReadFile(c.ManifestFile)
		if err != nil {
			return nil, fmt.Errorf("reading Calico manifest override: %w", err)
		}
		if err := verifySHA256(data, want); err != nil {
			return nil, fmt.Errorf("Calico manifest override %s: %w", c.ManifestFile, err)
		}
		return data, nil
	}
	var cachePath string
	if c.CacheDir != "" {
		cachePath = filepath.Join(c.CacheDir, "calico", want+".yaml")
		if data, err := os.ReadFile(cachePath); err == nil && verifySHA256(data, want) == nil {
			return data, nil
		}
	}
	data, err := download(ctx, c.HTTPClient, c.URL)
	if err != nil {
		return nil, err
	}
	if err := verifySHA256(data, want); err != nil {
		return nil, fmt.Errorf("Calico manifest from %s: %w", c.URL, err)
	}
	if cachePath != "" {
		if err := writeFileAtomic(cachePath, data); err != nil {
			return nil, fmt.Errorf("caching Calico manifest: %w", err)
		}
	}
	return data, nil
}

func verifySHA256(data []byte, want string) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%w: got %s, pinned %s", ErrChecksumMismatch, got, want)
	}
	return nil
}

func download(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("downloading %s: HTTP %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", url, err)
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("downloading %s: larger than %d bytes", url, maxManifestBytes)
	}
	return data, nil
}

// writeFileAtomic writes through a temp file and rename so a concurrent
// reader or a crash never sees a partial cache entry.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// DecodeManifest splits a multi-document YAML (or JSON) manifest into
// objects, skipping empty documents and expanding kind List.
func DecodeManifest(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading manifest document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parsing manifest document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("manifest document %d has no kind/apiVersion", i)
		}
		if u.IsList() {
			if err := u.EachListItem(func(o runtime.Object) error {
				out = append(out, o.(*unstructured.Unstructured))
				return nil
			}); err != nil {
				return nil, fmt.Errorf("manifest document %d: %w", i, err)
			}
			continue
		}
		out = append(out, u)
	}
}

// calicoInstallation is the operator's Installation: the pod IP pool and
// container IP forwarding (needed by VMs behind the pod network), images
// from the mirror when one is set.
func calicoInstallation(o Options) *unstructured.Unstructured {
	spec := map[string]any{
		"calicoNetwork": map[string]any{
			"containerIPForwarding": "Enabled",
			"ipPools": []any{map[string]any{
				"name":          "default-ipv4-ippool",
				"cidr":          o.ClusterCIDR,
				"blockSize":     int64(26),
				"encapsulation": "VXLANCrossSubnet",
				"natOutgoing":   "Enabled",
				"nodeSelector":  "all()",
			}},
		},
	}
	if m := strings.TrimRight(o.ImageRegistryMirror, "/"); m != "" {
		// The operator joins registry + image path ("calico/node"), which
		// is the MirrorImage rule for docker.io and quay.io images.
		spec["registry"] = m + "/"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.tigera.io/v1",
		"kind":       "Installation",
		"metadata": map[string]any{
			"name":   "default",
			"labels": map[string]any{managedByLabel: ManagedByLabelValue},
		},
		"spec": spec,
	}}
}

// calicoObjects is the verified operator manifest plus the Installation,
// with every image in the manifest rewritten through the mirror.
func calicoObjects(ctx context.Context, o Options) ([]*unstructured.Unstructured, error) {
	data, err := CalicoManifest(ctx, o.Calico)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("Calico operator manifest: %w", err)
	}
	for _, u := range objs {
		if err := mirrorImages(u, o.ImageRegistryMirror); err != nil {
			return nil, fmt.Errorf("rewriting images of %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return append(objs, calicoInstallation(o)), nil
}
