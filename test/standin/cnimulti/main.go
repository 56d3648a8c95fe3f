// Command cni stands in for k3s's multi-call CNI binary, /bin/cni in the
// rancher/k3s image. k3s builds rancher/plugins as one program that runs the
// plugin named by the base name of argv[0] (rancher/plugins
// main_linux.go@v1.9.1-k3s1: bandwidth, bridge, firewall, flannel,
// host-local, loopback, portmap, registered with moby's reexec) and links
// each of those names to it with a relative symlink in /bin (k3s-io/k3s
// scripts/build@v1.35.5+k3s1 builds rancher/plugins at VERSION_CNIPLUGINS,
// v1.9.1-k3s1 in scripts/version.sh@v1.35.5+k3s1, as bin/cni;
// scripts/package-cli@v1.35.5+k3s1 links bin/<plugin> to cni and packs
// bin/ into the data archive, which package/Dockerfile@v1.35.5+k3s1
// unpacks at / of the image; all read at 6a4781ad). rancher/plugins is
// not a module the proxy serves, and its plugins are main packages of the
// fork, so the stand-in cannot link them in: it runs the plugin the node
// image keeps under pluginDir with the same name, built from
// containernetworking/plugins, and for flannel the stand-in of
// flannel-io/cni-plugin (test/standin/flannelcni), which k3s's build puts in
// the fork's plugins/meta/flannel (k3s-io/k3s scripts/build@v1.35.5+k3s1). A copy
// of it runs only where the node's filesystem is (containerd in the node,
// Multus's delegates chrooted into it) or can be reached as /proc/1/root
// (a hostPID pod, as dra-driver-sriov's, which runs its NAD's plugins
// from a copy in /opt/cni/bin); k3s's copy is whole anywhere. What matters to the product is the
// layout: a plugin in /bin is a relative link to one binary that
// dispatches on its name, so copying /bin/bridge without following links
// leaves a dangling link, and a copy made with cp -L runs as the plugin it
// is named after.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// pluginDir is where the node image keeps the real plugins; pluginDirs
// are where a copy looks for them: in the node's root, or in it through
// PID 1 of a pod that shares the node's PID namespace.
const pluginDir = "/usr/lib/sriov-lane-standin/cni"

var pluginDirs = []string{pluginDir, "/proc/1/root" + pluginDir}

// plugins are the names rancher/plugins main_linux.go@v1.9.1-k3s1 registers.
var plugins = map[string]bool{
	"bandwidth": true, "bridge": true, "firewall": true, "flannel": true,
	"host-local": true, "loopback": true, "portmap": true,
}

func main() {
	dir := pluginDir
	for _, d := range pluginDirs {
		if _, err := os.Stat(d); err == nil {
			dir = d
			break
		}
	}
	bin, argv, ok := dispatch(os.Args, dir)
	if !ok {
		// rancher/plugins prints its build string and the CNI versions it
		// speaks, and exits 0, when argv[0] names no plugin.
		fmt.Fprintln(os.Stderr, "CNI plugins (sriov-lane stand-in of k3s's multi-call cni)")
		fmt.Fprintln(os.Stderr, "CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0")
		return
	}
	err := syscall.Exec(bin, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "cni stand-in: running %s: %v\n", bin, err)
	os.Exit(1)
}

// dispatch is the plugin the base name of args[0] names, as rancher/plugins
// picks it (os.Args[0] = filepath.Base(os.Args[0]), then reexec by name):
// its path under dir and its argv, or false for a name that is no plugin.
func dispatch(args []string, dir string) (bin string, argv []string, ok bool) {
	name := filepath.Base(args[0])
	if !plugins[name] {
		return "", nil, false
	}
	return filepath.Join(dir, name), append([]string{name}, args[1:]...), true
}
