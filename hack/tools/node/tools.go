//go:build tools

// Package node pins the container runtime a stand-in k3s node runs:
// containerd v2 with its runc shim and ctr, runc, and the reference CNI
// plugins k3s ships in its image, and host-device, which it does not ship
// and a fleet's SR-IOV hosts have (the fleet test). Built from Go modules because no release
// download or registry is reachable from the test machines.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/host-device"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/bandwidth"
	_ "github.com/containernetworking/plugins/plugins/meta/firewall"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/opencontainers/runc"
)
