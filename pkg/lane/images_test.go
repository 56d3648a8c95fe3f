package lane

import (
	"context"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func TestImagesNotesWhatTheyCannotKnow(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	imgs, notes, err := Images(context.Background(), l, []string{"ens1f0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("default lane: notes %v", notes)
	}
	var sandbox int
	for _, img := range imgs {
		if img.For == "k3s sandbox" {
			sandbox++
		}
		if img.Mirror != "" || img.Ref != img.Upstream {
			t.Errorf("no mirror, yet %+v", img)
		}
	}
	if sandbox != 1 {
		t.Errorf("%d sandbox images", sandbox)
	}

	l.K3sImage = "rancher/k3s:v1.36.1-k3s1"
	l.CNI = config.CNICalico
	_, notes, err = Images(context.Background(), l, []string{"ens1f0"})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{"k3s in rancher/k3s:v1.36.1-k3s1 may pull others", "is not cached", "Tigera operator pulls Calico's own images"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
}

// load --plan-images puts into the nodes the references they ask for:
// with a mirror, the components' through it, k3s's by upstream name.
func TestNodeImageRefs(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	l.ImageRegistryMirror = "mirror.example:5000"
	refs, err := NodeImageRefs(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, r := range refs {
		if has[r] {
			t.Errorf("%s twice", r)
		}
		has[r] = true
	}
	for _, want := range []string{"docker.io/rancher/mirrored-pause:3.6", "docker.io/rancher/mirrored-coredns-coredns:1.14.3", "mirror.example:5000/k8snetworkplumbingwg/multus-cni:v4.3.0-thick", "mirror.example:5000/library/busybox:1.37.0"} {
		if !has[want] {
			t.Errorf("refs %v lack %s", refs, want)
		}
	}
	for _, r := range refs {
		if strings.HasPrefix(r, "rancher/k3s:") || strings.Contains(r, "k3d-tools") {
			t.Errorf("host image %s among the nodes'", r)
		}
	}
}
