package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/docexample"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// DockerdRestartEnv turns TestDockerdRestartedLanesRepaired on; make test
// sets it. A dockerd restart stops every container on the host: run by
// hand, the test would restart whatever else the host runs.
const DockerdRestartEnv = "SRIOV_LANE_TEST_DOCKERD_RESTART"

// TestDockerdRestartedLanesRepaired restarts the host's dockerd itself under
// two lanes, one with its datastore on the default tmpfs and one on disk.
// dockerd stops every container and starts again those whose restart
// policy says so (k3d's nodes: unless-stopped); each agent runs in a new
// netns with its PF left in the pinned old one. status says so and exits 1,
// and for the tmpfs lane also that the cluster came back empty; repair
// brings each back (the tmpfs lane's objects applied again, the disk
// lane's kept: PFs and VFs only); status is healthy, verify passes, down
// brings every stand-in home. Its lanes come up beside the other tests;
// then it holds the host's Docker alone (testutil.RequireDockerAlone): it
// waits for every other test that uses Docker, in every package of make
// test, to end, and those that would start meanwhile wait for it, while
// the tests that need no Docker (the kernel tier, the API server tests) go
// on beside it. make test starts dockerd
// and the rig's registry again should the test die with them down.
func TestDockerdRestartedLanesRepaired(t *testing.T) {
	if os.Getenv(DockerdRestartEnv) != "1" {
		t.Skip("restarts the host's dockerd, which stops every container on it: make test runs it (" + DockerdRestartEnv + "=1)")
	}
	t.Parallel() // alone on Docker only for the restart (see above)
	requireRig(t)
	var lanes [2]*lane
	for i := range lanes {
		_, r, l := rigLane(t, 2, nil)
		lanes[i] = l
		t.Cleanup(func() { assertLaneGone(t, r, l, r.State.PFs) })
	}
	t.Run("up", func(t *testing.T) {
		for i, l := range lanes {
			t.Run(l.cfg.Name, func(t *testing.T) {
				t.Parallel()
				if i == 0 {
					l.up(t) // the datastore on a tmpfs, the default
					return
				}
				// The datastore on disk, as the docs' example asks.
				e := docexample.Lookup(t, "sriov-lane up --topology-manager-policy best-effort --datastore-on-tmpfs=false")
				if res := l.example(t, e, "--retain"); res.code != 0 {
					t.Fatal("up failed")
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	// The lanes came up beside the other tests; the restart waits for them.
	testutil.RequireDockerAlone(t)
	restartDockerd(t)
	// The two lanes are repaired side by side: the test holds Docker alone
	// until it ends, and every other Docker test waits for it.
	t.Run("repair", func(t *testing.T) {
		for i, l := range lanes {
			t.Run(l.cfg.Name, func(t *testing.T) {
				t.Parallel()
				repairRestartedLane(t, l, i == 0)
			})
		}
	})
}

// repairRestartedLane checks l after dockerd restarted every node under
// it (its cluster lost with the tmpfs datastore, or kept on disk), repairs
// it, checks it healthy and verified, that a second repair has nothing to
// do, and takes it down. It is the rig's one lane whose every node
// restarted at once: TestRestartedLaneRepaired restarts one agent, then
// the host.
func repairRestartedLane(t *testing.T, l *lane, lost bool) {
	res := statusOnceServerAnswers(t, l)
	if res.code != 1 || !strings.Contains(res.output, `"health": "degraded"`) || strings.Contains(res.output, `"clusterLost": true`) != lost ||
		strings.Contains(res.output, "came back empty") != lost ||
		!strings.Contains(res.output, "agent-0 restarted into a new network namespace") || !strings.Contains(res.output, "agent-1 restarted into a new network namespace") {
		t.Fatalf("status of %s (datastore on tmpfs: %t) after dockerd restarted: exit %d, want 1 with clusterLost %t\n%s", l.cfg.Name, lost, res.code, lost, res.output)
	}
	res = run(t, nil, "repair", "--config", l.path)
	for _, s := range []string{"the cluster's objects", "✓ deploy components (", "✓ record baseline ("} {
		if strings.Contains(res.output, s) != lost {
			t.Fatalf("repair of %s (datastore on tmpfs: %t): %q in its output is %t, want up's objects applied again (and a new baseline) only if the cluster was lost\n%s", l.cfg.Name, lost, s, !lost, res.output)
		}
	}
	if res.code != 0 || !strings.Contains(res.output, "wait for VFs") {
		t.Fatalf("repair of %s (datastore on tmpfs: %t): exit %d\n%s", l.cfg.Name, lost, res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status of %s after repair: exit %d\n%s", l.cfg.Name, res.code, res.output)
	}
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Fatalf("verify of %s after repair: exit %d", l.cfg.Name, res.code)
	}
	if res := run(t, nil, "repair", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "nothing to repair") {
		t.Fatalf("second repair of %s: exit %d\n%s", l.cfg.Name, res.code, res.output)
	}
	if res := l.down(t); res.code != 0 {
		t.Fatalf("down of %s after repair failed", l.cfg.Name)
	}
}

// restartDockerd stops the host's dockerd and starts it again as it was
// started: by systemd when systemd runs docker.service, else with the same
// command line and output (make test-env starts it detached, its output
// appended to a log). The test's cleanup starts it again if the test ends
// with it down.
func restartDockerd(t *testing.T) {
	t.Helper()
	if systemdRunsDocker() {
		if out, err := exec.Command("systemctl", "restart", "docker").CombinedOutput(); err != nil {
			t.Fatalf("systemctl restart docker: %v: %s", err, out)
		}
		waitDocker(t)
		return
	}
	pid := dockerdPID(t)
	argv := procStrings(t, pid, "cmdline")
	// Its own environment, not the test's: the restarted dockerd once took
	// the test's TMPDIR, removed with the test, and every later exec in a
	// container failed ("failed to create runc console socket: stat
	// /tmp/sriov-lane-e2e-tmp-...: no such file or directory").
	env := procStrings(t, pid, "environ")
	logPath, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid))
	start := func() error {
		cmd := exec.Command(argv[0], argv[1:]...)
		// From /, as make test-env starts it: a daemon working in the
		// test's directory loses it with the checkout, and what it starts
		// fails without one.
		cmd.Env, cmd.Dir = env, "/"
		if filepath.IsAbs(logPath) {
			f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			cmd.Stdout, cmd.Stderr = f, f
		}
		// Its own session: dockerd must outlive the test process.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		return cmd.Process.Release()
	}
	t.Cleanup(func() {
		if err := testutil.DockerPing(); err != nil {
			if err := start(); err != nil {
				t.Errorf("starting dockerd again (%q): %v", argv, err)
			}
		}
	})
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping dockerd (pid %d): %v", pid, err)
	}
	// dockerd stops every container (each gets its stop timeout) and exits.
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, bound.Scaled(2*time.Minute), true, func(context.Context) (bool, error) {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), nil
	})
	if err != nil {
		t.Fatalf("dockerd (pid %d) did not exit after SIGTERM: %v", pid, err)
	}
	if err := start(); err != nil {
		t.Fatalf("starting dockerd again (%q): %v", argv, err)
	}
	waitDocker(t)
	if now := procStrings(t, dockerdPID(t), "environ"); !slices.Equal(now, env) {
		t.Errorf("the restarted dockerd's environment differs from the one before")
	}
}

// dockerdPID is the running dockerd's pid, from its pidfile.
func dockerdPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/var/run/docker.pid")
	if err != nil {
		t.Fatalf("finding dockerd: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("/var/run/docker.pid: %v", err)
	}
	return pid
}

// procStrings is a NUL-separated file of /proc/<pid> (cmdline, environ).
func procStrings(t *testing.T, pid int, name string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatalf("dockerd (pid %d): %v", pid, err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func systemdRunsDocker() bool {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return false
	}
	return exec.Command("systemctl", "is-active", "--quiet", "docker").Run() == nil
}

// waitDocker waits for the restarted dockerd to answer.
func waitDocker(t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, bound.Scaled(time.Minute), true, func(context.Context) (bool, error) {
		return testutil.DockerPing() == nil, nil
	})
	if err != nil {
		t.Fatalf("dockerd does not answer after its restart: %v", err)
	}
}
