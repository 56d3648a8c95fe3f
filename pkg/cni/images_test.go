package cni

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMirrorImage(t *testing.T) {
	const m = "mirror.example:5000"
	cases := []struct{ mirror, in, want string }{
		{m, "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick", "mirror.example:5000/k8snetworkplumbingwg/multus-cni:v4.3.0-thick"},
		{m, "docker.io/calico/cni:v3.29.0", "mirror.example:5000/calico/cni:v3.29.0"},
		{m, "docker.io/library/busybox:1.37.0", "mirror.example:5000/library/busybox:1.37.0"},
		{m, "quay.io/tigera/operator:v1.36.0", "mirror.example:5000/tigera/operator:v1.36.0"},
		{m, "calico/node:v3.29.0", "mirror.example:5000/calico/node:v3.29.0"},
		{m, "busybox:1.36", "mirror.example:5000/library/busybox:1.36"},
		{m, "localhost/x/y:1", "mirror.example:5000/x/y:1"},
		{m, "registry:5000/a/b:2", "mirror.example:5000/a/b:2"},
		{m + "/", "ghcr.io/a/b@sha256:abc", "mirror.example:5000/a/b@sha256:abc"},
		{"", "ghcr.io/a/b:1", "ghcr.io/a/b:1"},
		{"http://10.0.0.5:5000", "ghcr.io/a/b:1", "10.0.0.5:5000/a/b:1"},
		{"https://mirror.example/", "quay.io/a/b:1", "mirror.example/a/b:1"},
	}
	for _, c := range cases {
		if got := MirrorImage(c.mirror, c.in); got != c.want {
			t.Errorf("MirrorImage(%q, %q) = %q, want %q", c.mirror, c.in, got, c.want)
		}
	}
}

func TestObjectImages(t *testing.T) {
	objs, err := Objects(context.Background(), defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := ObjectImages(objs)
	for _, want := range []string{MultusImage, SRIOVCNIImage, DevicePluginImage, FlannelImage, FlannelCNIPluginImage} {
		if !slices.Contains(got, want) {
			t.Errorf("images %v lack %s", got, want)
		}
	}
	seen := map[string]bool{}
	for _, img := range got {
		if seen[img] {
			t.Errorf("%s listed twice", img)
		}
		seen[img] = true
	}
	// ConfigMaps hold no images; a pod's init containers do.
	pod := &unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "spec": map[string]any{
		"initContainers": []any{map[string]any{"image": "a:1"}}, "containers": []any{map[string]any{"image": "b:2"}, map[string]any{"image": "a:1"}},
	}}}
	cm := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{"image": "c:3"}}}
	if got := ObjectImages([]*unstructured.Unstructured{cm, pod}); !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("pod images %v, want [a:1 b:2]", got)
	}
}
