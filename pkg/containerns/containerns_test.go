package containerns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

// fakeDocker answers inspects from a list of states, one per call; the last
// one repeats.
type fakeDocker struct {
	states []*container.State
	err    error
	calls  int
}

func (f *fakeDocker) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	if f.err != nil {
		return container.InspectResponse{}, f.err
	}
	st := f.states[min(f.calls, len(f.states)-1)]
	f.calls++
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{State: st}}, nil
}

func running(pid int) *container.State {
	return &container.State{Running: true, Pid: pid, Status: "running"}
}

func TestOpenChecksThePIDAgain(t *testing.T) {
	self := os.Getpid()
	h, err := Open(t.Context(), &fakeDocker{states: []*container.State{running(self)}}, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cur, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if !h.Equal(cur) {
		t.Error("Open gave another netns than the process's")
	}

	// A PID that changes between the inspects, every time: a container
	// restarting under Open is never trusted.
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.Kill(other); err != nil {
			t.Log(err)
		}
	})
	flip := &fakeDocker{}
	for range 2 * attempts {
		flip.states = append(flip.states, running(self), running(other.Process.Pid))
	}
	if _, err := Open(t.Context(), flip, "c"); err == nil {
		t.Error("a PID that changed while the netns was opened was trusted")
	}
}

func TestNotRunning(t *testing.T) {
	for name, d := range map[string]*fakeDocker{
		"stopped": {states: []*container.State{{Running: false, Status: "exited"}}},
		"removed": {err: fmt.Errorf("No such container: c: %w", cerrdefs.ErrNotFound)},
	} {
		if _, err := Open(t.Context(), d, "c"); !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s: %v, want ErrNotRunning", name, err)
		}
	}
	if _, err := PID(t.Context(), &fakeDocker{err: errors.New("daemon down")}, "c"); err == nil || errors.Is(err, ErrNotRunning) {
		t.Errorf("an inspect failure is no verdict on the container: %v", err)
	}
}
