package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// A node whose process sits in a frozen cgroup v1 freezer cgroup, as a
// runc killed mid-update leaves one, takes no SIGKILL: without a thaw,
// Docker's remove fails with "did not receive an exit event" and the
// node stays. removeContainers thaws it, says so, and the node goes.
func TestRigFrozenNodeIsThawedAndRemoved(t *testing.T) {
	_, err := os.Stat(filepath.Join(HostCgroupRoot, "freezer"))
	if os.IsNotExist(err) {
		t.Skip("no cgroup v1 freezer hierarchy: under cgroup v2 a fatal signal ends a frozen task, and there is nothing to thaw")
	}
	p, cli := rigDocker(t)
	name := testutil.TakeSlot(t).Lane(0)
	ctx := context.Background()
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: testutil.StandinBusyboxImage, Cmd: []string{"sleep", "3600"},
		Labels: map[string]string{labelK3dCluster: name}}, nil, nil, nil, "k3d-"+name+"-agent-0")
	if err != nil {
		t.Fatal(err)
	}
	var child string
	t.Cleanup(func() {
		if child != "" {
			_ = os.WriteFile(filepath.Join(child, "freezer.state"), []byte("THAWED"), 0)
		}
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
		if child != "" {
			_ = os.Remove(child)
		}
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Docker's start returns once runc has let its init exec the command,
	// not once the exec is done. Frozen while runc's init, a Go program
	// of several threads, is still in execve, the cgroup stays FREEZING
	// for good: the execing thread waits in de_thread (uninterruptible)
	// for its siblings to exit, and they sit in the refrigerator (seen in
	// make test: runc:[2:INIT] in begin_new_exec, its sibling in
	// __refrigerator). So wait for the node's process to be sleep.
	comm := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.State.Pid))
		return strings.TrimSpace(string(b))
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, bound.Scaled(10*time.Second), true, func(context.Context) (bool, error) {
		return comm() == "sleep", nil
	}); err != nil {
		t.Fatalf("the node's process never became sleep: %q", comm())
	}
	rel, err := freezerCgroup(c.State.Pid)
	if err != nil || rel == "" {
		t.Fatalf("the node's freezer cgroup: %q, %v", rel, err)
	}
	// The node's process moved into a cgroup of its own below the node's,
	// where a pod's container is, and frozen there.
	child = filepath.Join(HostCgroupRoot, "freezer", rel, "frozen-by-test")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(child, "cgroup.procs"), []byte(strconv.Itoa(c.State.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(child, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		b, _ := os.ReadFile(filepath.Join(child, "freezer.state"))
		return strings.TrimSpace(string(b))
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, bound.Scaled(10*time.Second), true, func(context.Context) (bool, error) {
		return state() == "FROZEN", nil
	}); err != nil {
		t.Fatalf("the cgroup did not freeze: %s\n%s", state(), taskReport(child))
	}

	removed, errs := p.removeContainers(ctx, name, map[string]bool{"k3d-" + name + "-agent-0": true})
	if len(errs) > 0 {
		t.Fatalf("removing a node with a frozen cgroup: %v", errs)
	}
	if len(removed) != 1 || !strings.Contains(removed[0], "1 frozen cgroup(s) in k3d-"+name+"-agent-0, thawed") {
		t.Errorf("notes %q do not say the frozen cgroup was thawed", removed)
	}
	if _, err := cli.ContainerInspect(ctx, created.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("the node is still there: %v", err)
	}
}

// taskReport says where each task of the freezer cgroup dir is: its state,
// the kernel function it waits in and its kernel stack, which say why the
// freezer has not caught it.
func taskReport(dir string) string {
	var b strings.Builder
	procs, _ := os.ReadFile(filepath.Join(dir, "tasks"))
	for _, pid := range strings.Fields(string(procs)) {
		st, _ := os.ReadFile("/proc/" + pid + "/status")
		var state string
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "State:") || strings.HasPrefix(l, "Name:") || strings.HasPrefix(l, "SigPnd:") || strings.HasPrefix(l, "ShdPnd:") {
				state += strings.TrimSpace(l) + "; "
			}
		}
		wchan, _ := os.ReadFile("/proc/" + pid + "/wchan")
		stack, _ := os.ReadFile("/proc/" + pid + "/stack")
		fmt.Fprintf(&b, "task %s: %swchan %s\n%s", pid, state, wchan, stack)
	}
	for _, f := range []string{"freezer.self_freezing", "freezer.parent_freezing"} {
		v, _ := os.ReadFile(filepath.Join(dir, f))
		fmt.Fprintf(&b, "%s: %s", f, v)
	}
	return b.String()
}
