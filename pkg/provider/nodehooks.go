package provider

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// k3d's node entrypoint runs every /bin/k3d-entrypoint-*.sh before it starts
// k3s, on every start of the container (k3d-io/k3d
// pkg/types/fixes/assets/k3d-entrypoint.sh@v5.9.0): the one place to change
// a node before k3s runs, restarts included. k3d v5.9.0 has no sysctl
// setting for nodes (none in its pkg/).
const ipv6HookInNode = "/bin/k3d-entrypoint-sriov-lane-ipv6.sh"

// ipv6Hook enables IPv6 in a node's netns for an ipv6 or dual lane. Docker
// leaves net.ipv6.conf.all (and so default) disable_ipv6=1 in a k3d node,
// only its network interface getting IPv6: kube-proxy then finds no IPv6
// support and exits on an ipv6 lane ("no support for primary IP family"),
// and an interface made in the node later cannot take an IPv6 address
// (Flannel's flannel-v6.1 failed with "permission denied" on a dual lane).
// kind sets the same two at container create for IPv6 clusters
// (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/provision.go@v0.32.0
// commonArgs). Writing all/disable_ipv6 sets
// default and every interface too (the kernel's addrconf_disable_ipv6).
const ipv6Hook = `#!/bin/sh
# Written by sriov-lane for an ipv6 or dual lane; k3d runs it before k3s.
set -e
echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/all/forwarding
`

func ipv6HookFile(l *config.Lane) string {
	return filepath.Join(l.Dir().NodeHooks(), filepath.Base(ipv6HookInNode))
}

// writeNodeHooks writes the node hooks the lane's nodes mount.
func writeNodeHooks(l *config.Lane) error {
	if l.IPFamily == config.IPFamilyIPv4 {
		return nil
	}
	if err := os.MkdirAll(l.Dir().NodeHooks(), 0o755); err != nil {
		return fmt.Errorf("creating node hook directory: %w", err)
	}
	if err := atomicfile.Write(ipv6HookFile(l), []byte(ipv6Hook), 0o755); err != nil {
		return fmt.Errorf("writing the IPv6 node hook: %w", err)
	}
	return nil
}
