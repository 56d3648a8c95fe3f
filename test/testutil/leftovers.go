package testutil

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// k3dClusterLabel is the label k3d puts on every container of a cluster
// (k3d-io/k3d pkg/types/types.go@v5.9.0 LabelClusterName). Spelled out
// rather than imported: k3d's types package would bring sixty modules into
// the stand-in k3s binary, which links this package through test/apiserver.
const k3dClusterLabel = "k3d.cluster"

// K3dLeftovers lists what of k3d cluster name still exists: its labelled
// containers, the containers named in also (those a failed create may
// leave before labelling anything), the network k3d-<name> and the image
// volume k3d-<name>-images, as k3d names them (k3d-io/k3d
// pkg/client/cluster.go@v5.9.0 ClusterPrepNetwork, ClusterPrepImageVolume).
// An empty list means nothing is left.
func K3dLeftovers(ctx context.Context, cli *client.Client, name string, also ...string) ([]string, error) {
	var left []string
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", k3dClusterLabel+"="+name))})
	if err != nil {
		return nil, fmt.Errorf("listing containers of %s: %w", name, err)
	}
	for _, c := range cs {
		left = append(left, "container "+c.ID[:12]+" "+fmt.Sprint(c.Names))
	}
	for _, n := range also {
		if _, err := cli.ContainerInspect(ctx, n); !cerrdefs.IsNotFound(err) {
			left = append(left, fmt.Sprintf("container %s (inspect err %v)", n, err))
		}
	}
	if _, err := cli.NetworkInspect(ctx, "k3d-"+name, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		left = append(left, fmt.Sprintf("network k3d-%s (inspect err %v)", name, err))
	}
	if _, err := cli.VolumeInspect(ctx, "k3d-"+name+"-images"); !cerrdefs.IsNotFound(err) {
		left = append(left, fmt.Sprintf("volume k3d-%s-images (inspect err %v)", name, err))
	}
	return left, nil
}
