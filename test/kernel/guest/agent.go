package guest

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Agent stands in for an agent node container: a child process in a netns
// of its own, which the package pins and moves PFs into as it does a
// node's. Stop ends it; its netns lives on while pinned.
type Agent struct {
	ID, Name string
	PID      int
	child
}

// StartAgent starts an agent; it is stopped when t ends.
func StartAgent(t testing.TB, name string) *Agent {
	t.Helper()
	c := newChild(t, roleAgent, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL})
	cmd := c.cmd
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting agent %s: %v", name, err)
	}
	a := &Agent{ID: fmt.Sprintf("%064x", cmd.Process.Pid), Name: name, PID: cmd.Process.Pid, child: c}
	t.Cleanup(a.Stop)
	// The child is in its netns from its first instruction (clone(2)).
	self, _ := os.Readlink("/proc/self/ns/net")
	deadline := time.Now().Add(WaitBound)
	for {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", a.PID))
		if err == nil && ns != self {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s: no netns of its own (%q, %v)", name, ns, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agentMain holds the netns until the parent closes stdin.
func agentMain() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// Docker answers ContainerInspect for agents, by ID, as Docker does for a
// running container: pkg/sriov opens a container's netns by its PID.
type Docker map[string]*Agent

func (d Docker) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	a, ok := d[id]
	if !ok {
		return container.InspectResponse{}, fmt.Errorf("no such container: %s: %w", id, cerrdefs.ErrNotFound)
	}
	running := a.cmd.ProcessState == nil
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{
		ID: a.ID, Name: "/" + a.Name,
		State: &container.State{Running: running, Status: map[bool]string{true: "running", false: "exited"}[running], Pid: a.PID},
	}}, nil
}
