package cni

import "testing"

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
		{"mirror.example:5000/proxy", "ghcr.io/a/b:1", "mirror.example:5000/proxy/a/b:1"},
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
