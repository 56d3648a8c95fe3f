package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// createRegistry runs the lane registry: published on l.Registry.Address on
// the host, and on the cluster network under the alias "registry", so the
// same image is registry:5000/x to the nodes and 127.0.0.1:5000/x to a
// `docker push` on the host. The network must exist (the cluster is made
// first). It waits until GET /v2/ answers 200 on the host address.
func (p *Provider) createRegistry(ctx context.Context, l *config.Lane) error {
	host, port, err := net.SplitHostPort(l.Registry.Address)
	if err != nil {
		return fmt.Errorf("registry address %q: %w", l.Registry.Address, err)
	}
	name := RegistryName(l.ClusterName())
	cport := nat.Port(registryInternalPort + "/tcp")
	if err := p.ensureImage(ctx, l.Registry.Image); err != nil {
		return fmt.Errorf("registry image: %w", err)
	}
	resp, err := p.docker.ContainerCreate(ctx,
		&container.Config{
			Image:        l.Registry.Image,
			ExposedPorts: nat.PortSet{cport: {}},
			Labels:       map[string]string{labelLane: l.ClusterName()},
		},
		&container.HostConfig{
			PortBindings:  nat.PortMap{cport: {{HostIP: host, HostPort: port}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			NetworkName(l.ClusterName()): {Aliases: []string{RegistryAlias}},
		}},
		nil, name)
	if err != nil {
		return fmt.Errorf("creating registry container %s from %s: %w", name, l.Registry.Image, err)
	}
	if err := p.docker.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("starting registry %s on %s: %w", name, l.Registry.Address, err)
	}
	if err := waitRegistry(ctx, l.Registry.Address); err != nil {
		return fmt.Errorf("registry %s: %w", name, err)
	}
	return nil
}

// registryProbeTimeout bounds one GET /v2/: the registry answers from
// memory in milliseconds once it listens; a request that hangs longer is
// retried rather than left to eat the create's wait.
const registryProbeTimeout = 2 * time.Second

// registryPollInterval is how often the registry is asked again while it
// starts: it takes a second or so, and each ask is one local request.
const registryPollInterval = 100 * time.Millisecond

// waitRegistry polls http://addr/v2/ until it answers 200, within ctx.
func waitRegistry(ctx context.Context, addr string) error {
	hc := &http.Client{Timeout: registryProbeTimeout}
	var last error
	err := wait.PollUntilContextCancel(ctx, registryPollInterval, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, nil
			}
			err = fmt.Errorf("GET /v2/ answered %s", resp.Status)
		}
		last = err
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("not answering on %s: %w (last: %v)", addr, ctx.Err(), last)
	}
	return err
}

// errNotOurs is returned when a container by the registry's name exists but
// was not made by a lane of that name.
var errNotOurs = errors.New("not created by sriov-lane")

// deleteRegistry removes the lane registry; gone already is success
// (removed false).
func (p *Provider) deleteRegistry(ctx context.Context, cluster string) (removed bool, err error) {
	name := RegistryName(cluster)
	ins, err := p.docker.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspecting registry %s: %w", name, err)
	}
	if ins.Config == nil || ins.Config.Labels[labelLane] != cluster {
		return false, fmt.Errorf("container %s: %w (label %s=%s missing), leaving it alone", name, errNotOurs, labelLane, cluster)
	}
	if err := p.docker.ContainerRemove(ctx, ins.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return false, fmt.Errorf("removing registry %s: %w", name, err)
	}
	return true, nil
}

// ensureImage pulls ref when the daemon does not have it (as k3d does for
// node images; the container-create API never pulls).
func (p *Provider) ensureImage(ctx context.Context, ref string) error {
	if _, err := p.docker.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspecting %s: %w", ref, err)
	}
	rc, err := p.docker.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("%s is not on the host and pulling it failed: %w", ref, err)
	}
	defer rc.Close()
	// The pull runs while its progress stream is read; errors arrive in it.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("pulling %s: %w", ref, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("pulling %s: %s", ref, msg.Error)
		}
	}
}
