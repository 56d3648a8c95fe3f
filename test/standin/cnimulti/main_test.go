package main

import (
	"slices"
	"testing"
)

// What rancher/plugins main_linux.go@v1.9.1-k3s1 runs for each argv[0]: the
// plugin registered under its base name (a copy made with cp -L keeps the
// name, a link in /bin is one), nothing for any other name.
func TestDispatchByBaseName(t *testing.T) {
	for _, c := range []struct {
		args []string
		bin  string
		argv []string
	}{
		{[]string{"bridge"}, "/lib/cni/bridge", []string{"bridge"}},
		{[]string{"/opt/cni/bin/host-local", "x"}, "/lib/cni/host-local", []string{"host-local", "x"}},
		{[]string{"/bin/flannel"}, "/lib/cni/flannel", []string{"flannel"}},
		{[]string{"/bin/cni"}, "", nil},
		{[]string{"/opt/cni/bin/macvlan"}, "", nil}, // not in k3s's build
	} {
		bin, argv, ok := dispatch(c.args, "/lib/cni")
		if bin != c.bin || !slices.Equal(argv, c.argv) || ok != (c.bin != "") {
			t.Errorf("%v: %s %v %v, want %s %v", c.args, bin, argv, ok, c.bin, c.argv)
		}
	}
}
