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

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// CalicoVersion is the pinned Calico release, deployed through the Tigera
// operator. v3.32 is tested on Kubernetes 1.34-1.36, which covers k3d
// v5.9.0's default k3s (v1.35) and the next minor; v3.29 (tested up to 1.32)
// is out of range for both.
const CalicoVersion = "v3.32.1"

// CalicoManifestBaseURL is where the pinned release's manifests/ are served.
const CalicoManifestBaseURL = "https://raw.githubusercontent.com/projectcalico/calico/" + CalicoVersion + "/manifests/"

// ManifestRef is one upstream file the lane applies verbatim, pinned by the
// sha256 and size of its git blob at CalicoVersion (raw file URLs serve the
// blob as-is).
type ManifestRef struct {
	// Name is the file name under the release's manifests/ directory, and
	// the name looked for in an override directory.
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// CalicoManifests are applied in this order: since v3.31 the CRDs are a
// separate file that must exist before the operator starts.
// projectcalico/calico manifests/operator-crds.yaml@v3.32.1 and
// manifests/tigera-operator.yaml@v3.32.1 (operator v1.42.3).
var CalicoManifests = []ManifestRef{
	{Name: "operator-crds.yaml", SHA256: "192f8b2d934ef24b62e86b7e1a6e1762d1c8af26a916f78057bc13fa5ed60f71", Size: 3046956},
	{Name: "tigera-operator.yaml", SHA256: "f18e073794207d372606bc3ea6f8fd73972f86d6828f4ba666dfe0d4aa8ab07f", Size: 19660},
}

// maxManifestBytes bounds a download; the largest pinned file is ~3 MiB.
const maxManifestBytes = 64 << 20

// manifestDownloadTimeout bounds one manifest download: a few MB from
// GitHub's CDN take seconds; a proxy that stalls must not hold up for the
// whole lane's wait.
const manifestDownloadTimeout = 2 * time.Minute

// ErrChecksumMismatch is returned (wrapped) when manifest bytes do not hash
// to the pinned digest.
var ErrChecksumMismatch = errors.New("sha256 mismatch")

// ErrNotCached is returned (wrapped) by an offline read of a manifest that
// is neither in the override directory nor in the cache.
var ErrNotCached = errors.New("not cached")

// PendingFetch is a pinned manifest that `up` would download: `plan` shows
// it instead of the objects it holds when it has no local copy.
type PendingFetch struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// url is where ref is downloaded from.
func (c CalicoOptions) url(ref ManifestRef) string {
	return strings.TrimRight(c.BaseURL, "/") + "/" + ref.Name
}

// CalicoManifest returns the verified bytes of one pinned manifest: from
// c.ManifestDir when set (air-gapped hosts), else from the cache in
// c.CacheDir, else (unless c.Offline) downloaded and then cached. Every
// source is checked against ref's digest; a cached copy that fails is
// replaced.
func CalicoManifest(ctx context.Context, c CalicoOptions, ref ManifestRef) ([]byte, error) {
	if c.BaseURL == "" {
		c.BaseURL = CalicoManifestBaseURL
	}
	want := strings.ToLower(ref.SHA256)
	if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("pinned checksum %q of Calico manifest %s is not a sha256 hex digest", ref.SHA256, ref.Name)
	}
	if c.ManifestDir != "" {
		p := filepath.Join(c.ManifestDir, ref.Name)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading Calico manifest override: %w", err)
		}
		if err := verifySHA256(data, want); err != nil {
			return nil, fmt.Errorf("Calico manifest override %s (want %s of Calico %s): %w", p, ref.Name, CalicoVersion, err)
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
	url := c.url(ref)
	if c.Offline {
		return nil, fmt.Errorf("Calico manifest %s: %w", url, ErrNotCached)
	}
	data, err := download(ctx, c.HTTPClient, url)
	if err != nil {
		return nil, err
	}
	if err := verifySHA256(data, want); err != nil {
		return nil, fmt.Errorf("Calico manifest from %s: %w", url, err)
	}
	if cachePath != "" {
		if err := os.MkdirAll(filepath.Dir(cachePath), 0o755); err != nil {
			return nil, fmt.Errorf("caching Calico manifest: %w", err)
		}
		// A concurrent reader or a crash never sees a partial cache entry.
		if err := atomicfile.Write(cachePath, data, 0o600); err != nil {
			return nil, fmt.Errorf("caching Calico manifest: %w", err)
		}
	}
	return data, nil
}

func verifySHA256(data []byte, want string) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%w: got %s (%d bytes), pinned %s", ErrChecksumMismatch, got, len(data), want)
	}
	return nil
}

func download(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	if client == nil {
		client = &http.Client{Timeout: manifestDownloadTimeout}
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

// DecodeManifest splits a multi-document YAML (or JSON) manifest into
// objects, skipping empty documents and expanding kind List.
func DecodeManifest(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReaderSize(bytes.NewReader(data), 1<<20))
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
//
// IP families: ipv4 has the IPv4 pool alone, dual adds an IPv6 pool, ipv6
// has the IPv6 pool alone. The IPv6 pool is named as the operator names its
// default one (tigera/operator pkg/controller/ippool/defaults.go@v1.42.3),
// uses VXLAN (the operator refuses IPIP on IPv6 pools,
// pkg/controller/installation/validation.go@v1.42.3) and the operator's
// IPv6 block size, /122; with an IPv6 pool the operator turns on IPv6 node
// address autodetection itself (firstFound, pkg/controller/installation/core_controller.go@v1.42.3).
func calicoInstallation(o Options) *unstructured.Unstructured {
	var pools []any
	if o.IPFamily != config.IPFamilyIPv6 {
		pools = append(pools, map[string]any{
			"name":          "default-ipv4-ippool",
			"cidr":          o.networks.PodV4,
			"blockSize":     int64(26),
			"encapsulation": "VXLANCrossSubnet",
			"natOutgoing":   "Enabled",
			"nodeSelector":  "all()",
		})
	}
	if o.IPFamily == config.IPFamilyIPv6 || o.IPFamily == config.IPFamilyDual {
		pools = append(pools, map[string]any{
			"name":          "default-ipv6-ippool",
			"cidr":          o.networks.PodV6,
			"blockSize":     int64(122),
			"encapsulation": "VXLANCrossSubnet",
			"natOutgoing":   "Enabled",
			"nodeSelector":  "all()",
		})
	}
	spec := map[string]any{
		"calicoNetwork": map[string]any{
			"containerIPForwarding": "Enabled",
			"ipPools":               pools,
		},
	}
	if m := mirrorDomain(o.ImageRegistryMirror); m != "" {
		// The operator joins registry + image path ("calico/node"), which
		// is the MirrorImage rule for docker.io and quay.io images; the
		// join is an image reference, so no scheme ("http://10.0.0.5:5000"
		// made "http://10.0.0.5:5000/calico/node:...", no image at all).
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

// calicoObjects is the verified upstream manifests, CRDs first, with every
// image rewritten through the mirror, plus the Installation. Offline, a
// manifest without a local copy is returned as pending instead.
func calicoObjects(ctx context.Context, o Options) ([]*unstructured.Unstructured, []PendingFetch, error) {
	var objs []*unstructured.Unstructured
	var pending []PendingFetch
	for _, ref := range o.Calico.Manifests {
		data, err := CalicoManifest(ctx, o.Calico, ref)
		if errors.Is(err, ErrNotCached) {
			pending = append(pending, PendingFetch{URL: o.Calico.url(ref), SHA256: ref.SHA256, Size: ref.Size})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		m, err := DecodeManifest(data)
		if err != nil {
			return nil, nil, fmt.Errorf("Calico manifest %s: %w", ref.Name, err)
		}
		for _, u := range m {
			if err := mirrorImages(u, o.ImageRegistryMirror); err != nil {
				return nil, nil, fmt.Errorf("rewriting images of %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
		objs = append(objs, m...)
	}
	return append(objs, calicoInstallation(o)), pending, nil
}
