package provider

import (
	"context"
	"fmt"
	"sort"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/vishvananda/netns"
)

// Node is one k3s node container of a lane. It holds no PID: a restarted
// container has a new one, so Netns and Pid resolve it at each call.
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

// Pid returns the node's current init PID (host PID namespace).
func (n Node) Pid(ctx context.Context) (int, error) {
	ins, err := n.p.docker.ContainerInspect(ctx, n.ContainerID)
	if err != nil {
		return 0, fmt.Errorf("inspecting node %s: %w", n.Name, err)
	}
	if ins.State == nil || !ins.State.Running || ins.State.Pid == 0 {
		status := "unknown"
		if ins.State != nil {
			status = ins.State.Status
		}
		return 0, fmt.Errorf("node %s is not running (status %s)", n.Name, status)
	}
	return ins.State.Pid, nil
}

// Netns opens the network namespace of the node's current PID. The caller
// closes the handle. The PID is checked again after opening, so a container
// restarting in between cannot hand out a recycled PID's namespace.
func (n Node) Netns(ctx context.Context) (netns.NsHandle, error) {
	for attempt := 0; attempt < 3; attempt++ {
		pid, err := n.Pid(ctx)
		if err != nil {
			return netns.None(), err
		}
		h, err := netns.GetFromPid(pid)
		if err != nil {
			return netns.None(), fmt.Errorf("opening netns of node %s (pid %d): %w", n.Name, pid, err)
		}
		again, err := n.Pid(ctx)
		if err == nil && again == pid {
			return h, nil
		}
		h.Close()
		if err != nil {
			return netns.None(), err
		}
	}
	return netns.None(), fmt.Errorf("node %s keeps restarting: its PID changed while opening its netns", n.Name)
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
		if err := p.docker.ContainerStop(ctx, a.ContainerID, container.StopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("stopping %s: %w", a.Name, err)
		}
	}
	return nil
}
