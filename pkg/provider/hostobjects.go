package provider

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Docker objects a lane's cluster needs before k3d's ClusterRun: both are
// labelled as the cluster's, so k3d's ClusterDelete and Delete remove them
// with it, and Create's own clean-up after a failure too.

// createDatastoreVolume makes the tmpfs-backed volume ClusterConfig mounts
// at the server's datastore dir. k3d would otherwise create a plain volume
// of that name itself (names with a k3d- prefix, k3d-io/k3d
// pkg/runtimes/util/volumes.go@v5.9.0). A Docker local volume with
// type=tmpfs, device=tmpfs is a tmpfs mount (Docker's `docker volume
// create --opt type=tmpfs`).
func (p *Provider) createDatastoreVolume(ctx context.Context, l *config.Lane) error {
	if !l.DatastoreOnTmpfs() {
		return nil
	}
	name := DatastoreVolumeName(l.ClusterName())
	if _, err := p.docker.VolumeInspect(ctx, name); err == nil {
		return fmt.Errorf("volume %s already exists: remove it if it is a leftover (sriov-lane down --name %s)", name, l.Name)
	}
	_, err := p.docker.VolumeCreate(ctx, volume.CreateOptions{
		Name:       name,
		Driver:     "local",
		DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "mode=0700"},
		Labels:     map[string]string{"app": "k3d", labelK3dCluster: l.ClusterName()},
	})
	if err != nil {
		return fmt.Errorf("creating tmpfs volume %s for the server's datastore (server.datastoreOnTmpfs): %w", name, err)
	}
	return nil
}

// ipv6Subnet is the lane network's IPv6 subnet: a /64 of unique local
// addresses derived from the lane name, so lanes side by side differ.
func ipv6Subnet(cluster string) string {
	h := sha256.Sum256([]byte("sriov-lane/" + cluster))
	return fmt.Sprintf("fd%02x:%02x%02x:%02x%02x::/64", h[0], h[1], h[2], h[3], h[4])
}

// createIPv6Network makes the cluster network k3d-<name> with IPv6 for
// ipFamily ipv6 and dual: k3d creates its networks IPv4-only (no IPv6
// option, k3d-io/k3d pkg/runtimes/docker/network.go@v5.9.0) and re-uses an
// existing network of that name, marking it external; Delete removes it by
// name. Nodes then get an IPv6 address beside the IPv4 one.
func (p *Provider) createIPv6Network(ctx context.Context, l *config.Lane) error {
	if l.IPFamily != config.IPFamilyIPv6 && l.IPFamily != config.IPFamilyDual {
		return nil
	}
	name := NetworkName(l.ClusterName())
	if _, err := p.docker.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		return fmt.Errorf("network %s already exists: remove it if it is a leftover (sriov-lane down --name %s)", name, l.Name)
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspecting network %s: %w", name, err)
	}
	on := true
	_, err := p.docker.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:     "bridge",
		EnableIPv6: &on,
		IPAM:       &network.IPAM{Config: []network.IPAMConfig{{Subnet: ipv6Subnet(l.ClusterName())}}},
		Options:    map[string]string{"com.docker.network.bridge.enable_ip_masquerade": "true"},
		Labels:     map[string]string{"app": "k3d", labelK3dCluster: l.ClusterName()},
	})
	if err != nil {
		return fmt.Errorf("ipFamily %s: Docker could not give the lane's network %s IPv6: %w (needs IPv6 in the host kernel and a Docker daemon that creates IPv6 bridge networks; use ipFamily ipv4 otherwise)", l.IPFamily, name, err)
	}
	return nil
}

// HostIPv6 reports whether this host's kernel has IPv6 on, which Docker
// needs to give a network IPv6: "" when it does, else why not. It reads
// procfs only, so check and up's preflight can call it.
func HostIPv6(procRoot string) string {
	b, err := os.ReadFile(procRoot + "/sys/net/ipv6/conf/all/disable_ipv6")
	if err != nil {
		return "the kernel has no IPv6 (" + err.Error() + ")"
	}
	if strings.TrimSpace(string(b)) != "0" {
		return "IPv6 is disabled (net.ipv6.conf.all.disable_ipv6=" + strings.TrimSpace(string(b)) + ")"
	}
	return ""
}
