package lane

import (
	"context"
	"fmt"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// Who pulls an image: the host's Docker (k3d, for the node containers and
// its tools) or every node's containerd (k3s and the pods).
const (
	PulledByHost  = "host"
	PulledByNodes = "nodes"
)

// Image is one image a lane pulls.
type Image struct {
	// Upstream is the image's own reference, registry host explicit.
	Upstream string `json:"upstream"`
	// Ref is the reference the puller asks for: with imageRegistryMirror,
	// the components' images are referenced through the mirror, while k3s
	// asks for its own by their upstream names and containerd sends them
	// to the mirror (registries.yaml "*").
	Ref string `json:"ref"`
	// Mirror is where the nodes find the image on imageRegistryMirror: the
	// path a mirror is pre-seeded at ("" without a mirror, and for what
	// the host pulls, which no mirror serves).
	Mirror   string `json:"mirror,omitempty"`
	PulledBy string `json:"pulledBy"`
	// For says what needs it ("k3s sandbox", "multus", "verify", ...).
	For string `json:"for"`
}

// Images is what a lane on l pulls: the host's images, k3s's own (its
// sandbox image and the packaged components the lane keeps), the
// components' and verify's smoke pod's. Notes say what the list cannot
// know. pfNames only shape the objects, not their images.
func Images(ctx context.Context, l *config.Lane, pfNames []string) (imgs []Image, notes []string, err error) {
	mirror := l.ImageRegistryMirror
	add := func(upstream, by, what string, referencedThroughMirror bool) {
		img := Image{Upstream: upstream, Ref: upstream, PulledBy: by, For: what}
		if by == PulledByNodes && mirror != "" {
			img.Mirror = cni.MirrorImage(mirror, upstream)
			if referencedThroughMirror {
				img.Ref = img.Mirror
			}
		}
		imgs = append(imgs, img)
	}
	for _, h := range provider.HostImages(l) {
		add(h.Image, PulledByHost, h.For, false)
	}
	k3s, known := provider.K3sNodeImages(l)
	if !known {
		notes = append(notes, fmt.Sprintf("k3s's own images are those of %s; k3s in %s may pull others", config.DefaultK3sImage, l.K3sImage))
	}
	add(k3s[0], PulledByNodes, "k3s sandbox", false)
	for _, c := range provider.K3sKept {
		for _, img := range c.Images {
			add(img, PulledByNodes, "k3s "+c.Name, false)
		}
	}

	// The components' upstream names: built without the mirror, which
	// only rewrites them (cni.MirrorImage).
	upstream := *l
	upstream.ImageRegistryMirror = ""
	cs, err := plannedComponents(ctx, &upstream, pfNames)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs {
		for _, img := range cni.ObjectImages(c.Objects) {
			add(img, PulledByNodes, c.Name, true)
		}
		for _, p := range c.Pending {
			notes = append(notes, fmt.Sprintf("%s is not cached: the images of its objects are listed once up has fetched it", p.URL))
		}
		if c.Name == "calico" {
			notes = append(notes, "the Tigera operator pulls Calico's own images (calico/node, calico/cni, ...) itself: they are not listed")
		}
	}
	add(cni.SmokeImage, PulledByNodes, "verify", true)
	return imgs, notes, nil
}

// NodeImageRefs are the references the nodes of a lane on l ask for, each
// once: what `load --plan-images` puts into them. The PF names only shape
// objects, so any stand for them.
func NodeImageRefs(ctx context.Context, l *config.Lane) ([]string, error) {
	pfs := make([]string, l.PFsNeeded())
	for i := range pfs {
		pfs[i] = fmt.Sprintf("PF%d", i)
	}
	imgs, _, err := Images(ctx, l, pfs)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, img := range imgs {
		if img.PulledBy == PulledByNodes && !seen[img.Ref] {
			seen[img.Ref] = true
			out = append(out, img.Ref)
		}
	}
	return out, nil
}
