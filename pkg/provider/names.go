package provider

import (
	"fmt"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Roles of the node containers, as k3d labels them.
const (
	RoleServer = "server"
	RoleAgent  = "agent"
)

// Docker labels k3d puts on every object of a cluster.
const (
	labelK3dCluster = "k3d.cluster"
	labelK3dRole    = "k3d.role"
	// labelLane marks objects this package creates outside k3d (the
	// registry), so delete-by-name never removes somebody else's container.
	labelLane = "sriov-lane.io/lane"
)

// RegistryAlias is the name nodes reach the lane registry by
// (kubevirtci's docker_prefix convention: registry:5000/IMAGE).
const RegistryAlias = "registry"

// registryInternalPort is where the registry listens inside its container
// and on the cluster network.
const registryInternalPort = "5000"

// NodeName is the container (and hostname) of a node, k3d's scheme.
func NodeName(cluster, role string, i int) string {
	return fmt.Sprintf("k3d-%s-%s-%d", cluster, role, i)
}

// NetworkName is the cluster's Docker network.
func NetworkName(cluster string) string { return "k3d-" + cluster }

// ImageVolumeName is the volume k3d shares between nodes for image imports.
func ImageVolumeName(cluster string) string { return "k3d-" + cluster + "-images" }

// toolsName is k3d's helper container for a cluster.
func toolsName(cluster string) string { return "k3d-" + cluster + "-tools" }

// RegistryName is the lane registry's container.
func RegistryName(cluster string) string { return cluster + "-registry" }

// nodeNames lists every node of the lane, server first.
func nodeNames(l *config.Lane) []string {
	names := []string{NodeName(l.ClusterName(), RoleServer, 0)}
	for i := 0; i < l.Agents; i++ {
		names = append(names, NodeName(l.ClusterName(), RoleAgent, i))
	}
	return names
}
