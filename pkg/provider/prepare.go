package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
)

// vfioContainerDev is the VFIO container device VMs open; it is root-only
// by default and virt-launcher does not run as root.
const vfioContainerDev = devVFIO + "/vfio"

// Prepare readies a node for the lane: / becomes recursively shared (mount
// propagation for kubelet and the CNI/device plugin pods) and, when the node
// has /dev/vfio/vfio, it is made world read-writable.
func (p *Provider) Prepare(ctx context.Context, n Node) error {
	if err := p.run(ctx, n.ContainerID, []string{"mount", "--make-rshared", "/"}, nil); err != nil {
		return fmt.Errorf("preparing node %s: %w", n.Name, err)
	}
	if _, err := p.docker.ContainerStatPath(ctx, n.ContainerID, vfioContainerDev); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("preparing node %s: looking for %s: %w", n.Name, vfioContainerDev, err)
	}
	if err := p.run(ctx, n.ContainerID, []string{"chmod", "0666", vfioContainerDev}, nil); err != nil {
		return fmt.Errorf("preparing node %s: %w", n.Name, err)
	}
	return nil
}

// PrepareAll runs Prepare on every node of the cluster, all nodes at once:
// each is a few execs that wait on the container runtime, not on each
// other. Every node's error is returned.
func (p *Provider) PrepareAll(ctx context.Context, cluster string) error {
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return err
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Prepare(ctx, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
