package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// Delete removes the lane's cluster, registry and anything a failed create
// left behind, all by name: containers labelled for the cluster, the network
// k3d-<name> and the volume k3d-<name>-images. Running it on a lane that is
// gone, or twice, succeeds.
func (p *Provider) Delete(ctx context.Context, cluster string) error {
	_, err := p.delete(ctx, cluster)
	return err
}

// delete returns what it removed, for the journal's notes.
func (p *Provider) delete(ctx context.Context, cluster string) (removed []string, err error) {
	var errs []error
	// The registry first: it holds an endpoint on the cluster network.
	if ok, err := p.deleteRegistry(ctx, cluster); err != nil {
		errs = append(errs, err)
	} else if ok {
		removed = append(removed, "registry "+RegistryName(cluster))
	}

	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return removed, err
	}
	if len(nodes) > 0 {
		removed = append(removed, fmt.Sprintf("cluster %s (%d nodes)", cluster, len(nodes)))
	}
	isNode := map[string]bool{}
	for _, n := range nodes {
		isNode[n.Name] = true
	}

	rm, rmErrs := p.removeContainers(ctx, cluster, isNode)
	removed, errs = append(removed, rm...), append(errs, rmErrs...)

	rm, netErrs := p.removeNetworks(ctx, cluster)
	removed, errs = append(removed, rm...), append(errs, netErrs...)

	vols := map[string]bool{ImageVolumeName(cluster): true}
	if vl, err := p.docker.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelK3dCluster+"="+cluster))}); err == nil {
		for _, v := range vl.Volumes {
			vols[v.Name] = true
		}
	}
	for v := range vols {
		err := p.removeVolume(ctx, v, func() {
			// A create killed mid-way can have asked Docker for a node that
			// appears only now (Docker finishes a create whose client is
			// gone) and holds the volume: it is the lane's, by its label.
			rm, _ := p.removeContainers(ctx, cluster, isNode)
			removed = append(removed, rm...)
		})
		if err == nil {
			removed = append(removed, "volume "+v)
		} else if !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing volume %s: %w", v, err))
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("deleting lane cluster %s: %w", cluster, errors.Join(errs...))
	}
	return removed, nil
}

// After a create that was interrupted (the journal has its intent and no
// done: an up killed inside k3d's create), Docker may still finish what
// the dead client asked for, after down listed what there was: a network
// created 1.6 s into an up SIGKILLed then was left by a down that found
// nothing (seen in make test, Docker 20.10 on a loaded host). Docker
// reports what it has made, never what it is still making, so the undo
// follows its events for interruptedCreateBound and deletes again each time
// it reports a create of the lane's. The bound is Docker's time to answer
// a request whose client is gone (the journal's lock says the up is): a
// network create took up to 4.6 s beside make test's lanes.
const interruptedCreateBound = 20 * time.Second

// deleteInterruptedCreate is delete, then delete again on each object of
// the lane that Docker reports making within interruptedCreateBound.
func (p *Provider) deleteInterruptedCreate(ctx context.Context, cluster string) ([]string, error) {
	fctx, cancel := context.WithTimeout(ctx, interruptedCreateBound)
	defer cancel()
	created, errs := p.followEvents(fctx, filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("type", string(events.NetworkEventType)), filters.Arg("type", string(events.VolumeEventType)),
		filters.Arg("event", string(events.ActionCreate)))
	removed, err := p.delete(ctx, cluster)
	for err == nil {
		select {
		case m := <-created:
			if !isLanes(m, cluster) {
				continue
			}
			var rm []string
			rm, err = p.delete(ctx, cluster)
			removed = append(removed, rm...)
		case e := <-errs:
			if fctx.Err() != nil && ctx.Err() == nil {
				return removed, nil // the bound: Docker has answered the dead create
			}
			return removed, fmt.Errorf("deleting lane cluster %s after an interrupted create: %w", cluster, eventsErr(ctx, fctx, e, "", 0))
		}
	}
	return removed, err
}

// isLanes reports whether Docker's event m is about an object that can be
// cluster's: a container with its label, its network, a volume named for
// it (Docker's events carry a container's labels and name and a network's
// name as attributes, a volume's name as its ID: moby daemon/events.go and
// volume/service/service.go@v20.10.24). It is only a cue to delete again, so a near miss (a volume of lane
// "a-b" for lane "a") costs one delete that finds nothing of cluster's.
func isLanes(m events.Message, cluster string) bool {
	switch m.Type {
	case events.ContainerEventType:
		return m.Actor.Attributes[labelK3dCluster] == cluster
	case events.NetworkEventType:
		return m.Actor.Attributes["name"] == NetworkName(cluster)
	case events.VolumeEventType:
		return strings.HasPrefix(m.Actor.ID, NetworkName(cluster)+"-")
	}
	return false
}

// removeNetworks removes every network named for the cluster, by ID. There
// can be two: Docker finishes a network create whose client was killed (an
// up SIGKILLed inside k3d's create) after the next up looked for one and
// made its own, and Docker 20.10 refuses to remove either by the name they
// share ("network ... is ambiguous"), which left down unable to finish.
func (p *Provider) removeNetworks(ctx context.Context, cluster string) (removed []string, errs []error) {
	name := NetworkName(cluster)
	nets, err := p.docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, []error{fmt.Errorf("listing networks named %s: %w", name, err)}
	}
	for _, n := range nets {
		if n.Name != name { // the name filter matches substrings
			continue
		}
		if err := p.docker.NetworkRemove(ctx, n.ID); err == nil {
			removed = append(removed, "network "+name)
		} else if !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing network %s (%.12s): %w", name, n.ID, err))
		}
	}
	return removed, errs
}

// removeContainers removes every container labelled for the cluster (its
// nodes, k3d's helpers, what a failed create left), all at once: k3d's
// ClusterDelete removes nodes one after another (k3d-io/k3d
// pkg/client/cluster.go@v5.9.0), which was most of down. It returns the
// names of those that are not nodes (isNode), for the journal's notes.
func (p *Provider) removeContainers(ctx context.Context, cluster string, isNode map[string]bool) (removed []string, errs []error) {
	list, err := p.docker.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", labelK3dCluster+"="+cluster)),
	})
	if err != nil {
		return nil, []error{fmt.Errorf("listing containers of %s: %w", cluster, err)}
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, c := range list {
		wg.Go(func() {
			name := trimSlash(c.Names[0])
			thawed, thawErr := p.thawContainer(ctx, c.ID)
			err := p.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if cerrdefs.IsConflict(err) {
				// "removal already in progress": a down killed mid-delete
				// left Docker finishing it. Wait for it rather than fail on
				// it (and on the network and volumes it still holds).
				err = p.waitContainerGone(ctx, c.ID)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(thawed) > 0 {
				removed = append(removed, fmt.Sprintf("%d frozen cgroup(s) in %s, thawed so its tasks could be killed", len(thawed), name))
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing container %s of %s: %w", name, cluster, errors.Join(err, thawErr)))
			} else if err == nil && !isNode[name] {
				removed = append(removed, "container "+name)
			}
		})
	}
	wg.Wait()
	return removed, errs
}

// thawContainer thaws the frozen cgroups of container id's processes
// (thawFrozen), which would keep Docker from killing it; a container that
// is not running has none.
func (p *Provider) thawContainer(ctx context.Context, id string) ([]string, error) {
	c, err := p.docker.ContainerInspect(ctx, id)
	if err != nil || c.State == nil || !c.State.Running || c.State.Pid == 0 {
		return nil, nil
	}
	return thawFrozen(c.State.Pid)
}

// removeVolume removes a volume, calling inUse each time Docker says it is
// in use and trying again when Docker next reports a container destroyed,
// for up to volumeReleaseTimeout. Docker drops a removed container from its
// list before it releases the container's volumes, and reports it destroyed
// only after (moby daemon/delete.go cleanupContainer@v20.10.24 and @v28.5.2:
// containers.Delete, removeMountPoints, then the destroy event), so after a
// down killed mid-delete, the next down can find the node gone and its
// volume still held until that event.
func (p *Provider) removeVolume(ctx context.Context, name string, inUse func()) error {
	fctx, cancel := context.WithTimeout(ctx, volumeReleaseTimeout)
	defer cancel()
	destroyed, errs := p.followEvents(fctx, filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("event", string(events.ActionDestroy)))
	for {
		// Not forced: Docker ignores "no such volume" when forcing, and the
		// note must say whether the volume was there.
		err := p.docker.VolumeRemove(ctx, name, false)
		if !cerrdefs.IsConflict(err) {
			return err
		}
		inUse()
		select {
		case <-destroyed:
		case e := <-errs:
			if fctx.Err() != nil && ctx.Err() == nil {
				// Still in use when the bound passed: Docker's answer
				// says by what.
				return err
			}
			return eventsErr(ctx, fctx, e, "", 0)
		}
	}
}

// volumeReleaseTimeout bounds the wait for a volume a container being
// removed still holds; a volume held longer is held by a container that is
// not the lane's, and down says so.
const volumeReleaseTimeout = 10 * time.Second

// containerGoneTimeout bounds the wait for a removal Docker already has
// under way; removing a node container takes well under a second.
const containerGoneTimeout = 30 * time.Second

// waitContainerGone waits until Docker reports the container destroyed.
func (p *Provider) waitContainerGone(ctx context.Context, id string) error {
	fctx, cancel := context.WithTimeout(ctx, containerGoneTimeout)
	defer cancel()
	destroyed, errs := p.followEvents(fctx, filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("container", id), filters.Arg("event", string(events.ActionDestroy)))
	if _, err := p.docker.ContainerInspect(ctx, id); cerrdefs.IsNotFound(err) {
		return nil
	}
	select {
	case <-destroyed:
		return nil
	case e := <-errs:
		return eventsErr(ctx, fctx, e, fmt.Sprintf("container %s is still being removed", id[:min(12, len(id))]), containerGoneTimeout)
	}
}
