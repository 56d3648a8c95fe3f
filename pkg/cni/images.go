package cni

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Pinned component images (field notes section 5). Tags only, never latest:
// a lane run must be reproducible and a mirror must be able to pre-seed them.
const (
	MultusImage           = "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick"
	SRIOVCNIImage         = "ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0"
	DevicePluginImage     = "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0"
	FlannelImage          = "ghcr.io/flannel-io/flannel:v0.28.9"
	FlannelCNIPluginImage = "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3"
	// SmokeImage is verify's smoke pod's (pkg/smoke), pinned here with the
	// others so the mirror and the image list have them all in one place.
	SmokeImage = "docker.io/library/busybox:1.37.0"
)

// MirrorImage rewrites an image reference to pull through a registry mirror.
//
// Rule: the registry host of ref is replaced by mirror and the repository
// path and tag/digest are kept. The registry host is the first path
// component when it contains "." or ":" or is "localhost"; otherwise the
// image lives on Docker Hub, whose implicit "library/" namespace is made
// explicit for single-component names. Examples with mirror
// "mirror.example:5000":
//
//	ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick -> mirror.example:5000/k8snetworkplumbingwg/multus-cni:v4.3.0-thick
//	docker.io/calico/cni:v3.29.0                         -> mirror.example:5000/calico/cni:v3.29.0
//	quay.io/tigera/operator:v1.36.0                      -> mirror.example:5000/tigera/operator:v1.36.0
//	busybox:1.36                                         -> mirror.example:5000/library/busybox:1.36
//
// An empty mirror returns ref unchanged. mirror is HOST[:PORT], a registry
// at the host's root (config refuses a path: checkMirror says why).
func MirrorImage(mirror, ref string) string {
	mirror = mirrorDomain(mirror)
	if mirror == "" || ref == "" {
		return ref
	}
	repo := ref
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		first := ref[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			repo = ref[i+1:]
		}
	}
	if !strings.Contains(repo, "/") {
		repo = "library/" + repo
	}
	return mirror + "/" + repo
}

// podSpecPaths are where workload kinds keep their pod spec.
var podSpecPaths = map[string][]string{
	"Pod":         {"spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

// mirrorImages rewrites the image of every container of a workload taken
// from an upstream manifest (typed objects are built with the mirror already).
func mirrorImages(u *unstructured.Unstructured, mirror string) error {
	if mirror == "" {
		return nil
	}
	return eachContainer(u, true, func(c map[string]any) {
		if img, ok := c["image"].(string); ok {
			c["image"] = MirrorImage(mirror, img)
		}
	})
}

// ObjectImages are the container images of every workload among objs, in
// order, each once.
func ObjectImages(objs []*unstructured.Unstructured) []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range objs {
		_ = eachContainer(u, false, func(c map[string]any) {
			if img, ok := c["image"].(string); ok && img != "" && !seen[img] {
				seen[img] = true
				out = append(out, img)
			}
		})
	}
	return out
}

// eachContainer calls fn with every container (init, regular, ephemeral)
// of u's pod spec, when u is a workload kind, and writes the spec back when
// write is set.
func eachContainer(u *unstructured.Unstructured, write bool, fn func(map[string]any)) error {
	p, ok := podSpecPaths[u.GetKind()]
	if !ok {
		return nil
	}
	spec, found, err := unstructured.NestedMap(u.Object, p...)
	if err != nil || !found {
		return err
	}
	for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
		cs, ok := spec[field].([]any)
		if !ok {
			continue
		}
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				fn(cm)
			}
		}
	}
	if !write {
		return nil
	}
	return unstructured.SetNestedMap(u.Object, spec, p...)
}

// mirrorDomain is the mirror as an image reference's domain: a scheme
// ("http://" for a plain-HTTP mirror) is for the nodes' registries.yaml
// only, and a reference has none (distribution/reference
// reference.go@v0.6.0: reference := name [ ":" tag ] [ "@" digest ], name
// := [domain '/'] remote-name); a trailing "/" is dropped.
func mirrorDomain(mirror string) string {
	if _, after, ok := strings.Cut(mirror, "://"); ok {
		mirror = after
	}
	return strings.TrimRight(mirror, "/")
}
