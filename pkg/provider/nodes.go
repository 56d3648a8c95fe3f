package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// Node is one k3s node container of a lane. It holds no PID: a restarted
// container has a new one (pkg/containerns opens its netns by ID).
type Node struct {
	Name        string
	Role        string // RoleServer or RoleAgent
	ContainerID string
	p           *Provider
}

// Nodes lists the lane's server and agent containers, server first, then
// agents by name.
func (p *Provider) Nodes(ctx context.Context, cluster string) ([]Node, error) {
	list, err := p.docker.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", labelK3dCluster+"="+cluster)),
	})
	if err != nil {
		return nil, fmt.Errorf("listing containers of cluster %s: %w", cluster, err)
	}
	var nodes []Node
	for _, c := range list {
		role := c.Labels[labelK3dRole]
		if role != RoleServer && role != RoleAgent || len(c.Names) == 0 {
			continue
		}
		nodes = append(nodes, Node{Name: trimSlash(c.Names[0]), Role: role, ContainerID: c.ID, p: p})
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Role != nodes[j].Role {
			return nodes[i].Role == RoleServer
		}
		return nodes[i].Name < nodes[j].Name
	})
	return nodes, nil
}

// Agents is Nodes narrowed to agents.
func (p *Provider) Agents(ctx context.Context, cluster string) ([]Node, error) {
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range nodes {
		if n.Role == RoleAgent {
			out = append(out, n)
		}
	}
	return out, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// agentStopTimeout is how long an agent gets to stop before it is killed.
// Nothing in it needs a graceful end: the cluster is deleted next.
const agentStopTimeout = 5

// StopAgents stops the lane's agent containers, and with them every
// process in them: the workloads (QEMU of KubeVirt VMs) that may hold VFs
// open. Stopped containers stay stopped (k3d's restart policy is
// unless-stopped). Agents already stopped or gone are fine.
func (p *Provider) StopAgents(ctx context.Context, cluster string) error {
	agents, err := p.Agents(ctx, cluster)
	if err != nil {
		return err
	}
	timeout := agentStopTimeout
	for _, a := range agents {
		_, thawErr := p.thawContainer(ctx, a.ContainerID)
		if err := p.docker.ContainerStop(ctx, a.ContainerID, container.StopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("stopping %s: %w", a.Name, errors.Join(err, thawErr))
		}
	}
	return nil
}

// AgentsStartedBeforeServerStopped returns the lane's running agents whose
// current run began before the server's last run ended: each started, and
// its kubelet may have registered, while the server as it was then still
// served. The engine's own start and finish times tell, so it holds after
// any order of restarts: a dockerd restart starts every node after it
// stopped them all (none returned), docker restart one container after
// another does not.
func (p *Provider) AgentsStartedBeforeServerStopped(ctx context.Context, cluster string) ([]Node, error) {
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var serverStopped time.Time
	var out []Node
	for _, n := range nodes { // the server first
		info, err := p.docker.ContainerInspect(ctx, n.ContainerID)
		if err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", n.Name, err)
		}
		if n.Role == RoleServer {
			// Zero ("0001-01-01T00:00:00Z") when it never stopped.
			serverStopped, _ = time.Parse(time.RFC3339Nano, info.State.FinishedAt)
			continue
		}
		started, err := time.Parse(time.RFC3339Nano, info.State.StartedAt)
		if err != nil || !info.State.Running {
			continue
		}
		if started.Before(serverStopped) {
			out = append(out, n)
		}
	}
	return out, nil
}

// RestartAgent restarts an agent container, as the engine's restart does.
func (p *Provider) RestartAgent(ctx context.Context, a Node) error {
	timeout := agentStopTimeout
	if err := p.docker.ContainerRestart(ctx, a.ContainerID, container.StopOptions{Timeout: &timeout}); err != nil {
		return fmt.Errorf("restarting %s: %w", a.Name, err)
	}
	return nil
}
