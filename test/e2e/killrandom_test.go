package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// TestSIGKILLAtRandomPointsLosesNothing kills up, down and repair with
// SIGKILL at random moments, inside steps and not only between them, and
// checks that a down from a new process then loses nothing: both stand-in
// PFs home under their names with numvfs 0, no container, network, volume,
// lease, mount or lane dir left. Each round kills an up, then, on a lane
// that is up, a repair and after it a down (one lane up serves two kills:
// ups are what the test costs). The rounds run in parallel, each on a rig
// and lane of its own with its kill points drawn from the seed and its
// number alone, so the seed logged replays a failure whatever ran beside.
//
// Odd rounds run on rootful Podman, sharing these ups rather than adding
// lanes of their own: there the lane that is up is verified, every node
// restarted through Podman (new PIDs and netns, as after the host's
// containers restart) and repaired to healthy before the down is killed,
// so a Podman lane goes through up, verify, repair after its containers
// restart, kills and down.
func TestSIGKILLAtRandomPointsLosesNothing(t *testing.T) {
	parallelOnRig(t)
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("SRIOV_LANE_TEST_SEED"), 10, 64); err == nil {
		seed = s // replay a failure
	}
	t.Logf("seed %d (replay with SRIOV_LANE_TEST_SEED)", seed)
	// Two rounds by default: with real pods every up on the rig takes
	// ~25 s, and TestKillAtEachStepThenDown covers every step's boundary.
	// SRIOV_LANE_TEST_ROUNDS runs more (a soak), -parallel at a time.
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("SRIOV_LANE_TEST_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	t.Logf("%d rounds", rounds)
	for round := range rounds {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			t.Parallel()
			rnd := rand.New(rand.NewPCG(seed, uint64(round)))
			engine := config.EngineDocker
			if round%2 == 1 {
				engine = config.EnginePodman
			}
			_, r, l := rigLane(t, 2, func(c *config.Lane) { c.ContainerEngine = engine })
			cli := engineClient(t, l)
			// Up to about how long each command runs on the rig, so that
			// most kills land inside it.
			within := func(max time.Duration) time.Duration { return time.Duration(rnd.Int64N(int64(max))) }
			downThenCheck := func(t *testing.T, what string) {
				t.Helper()
				res := l.down(t)
				if res.code != 0 {
					t.Fatalf("down after %s was killed failed:\n%s", what, res.output)
				}
				if strings.Contains(res.output, "not found") {
					t.Errorf("down after a killed %s reports a lost PF:\n%s", what, res.output)
				}
				assertLaneGone(t, r, l, r.State.PFs)
			}
			// Both kill points are drawn before either command runs: the
			// draws are the seed's, not the order the subtests end in.
			upKill, repairKill, downKill := within(7*time.Second), within(4*time.Second), within(2*time.Second)
			if !t.Run("up", func(t *testing.T) {
				killAfter(t, upKill, "up", "--config", l.path)
				downThenCheck(t, "up")
			}) {
				return
			}
			if engine == config.EnginePodman {
				t.Run("restart_repair_then_down", func(t *testing.T) {
					l.up(t)
					restartRepairOnPodman(t, cli, l)
					killAfter(t, downKill, "down", "--config", l.path)
					downThenCheck(t, "a down")
				})
				return
			}
			t.Run("repair_then_down", func(t *testing.T) {
				l.up(t)
				if err := cli.ContainerRestart(context.Background(), "k3d-"+l.cfg.Name+"-agent-0", container.StopOptions{}); err != nil {
					t.Fatal(err)
				}
				killAfter(t, repairKill, "repair", "--config", l.path)
				killAfter(t, downKill, "down", "--config", l.path)
				downThenCheck(t, "repair and a down")
			})
		})
	}
}

// restartRepairOnPodman verifies the Podman lane l that is up, restarts
// every node container through Podman at once, and checks that status
// finds the PFs left in the old, pinned netns (degraded, exit 1) and that
// repair brings the lane back: status healthy and verify passing again.
func restartRepairOnPodman(t *testing.T, podman *client.Client, l *lane) {
	t.Helper()
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Fatalf("verify on Podman failed:\n%s", res.output)
	}
	nodes, err := podman.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "k3d.cluster="+l.cfg.Name))})
	if err != nil || len(nodes) != l.cfg.Agents+1 {
		t.Fatalf("the lane's node containers in Podman: %d, %v; want %d", len(nodes), err, l.cfg.Agents+1)
	}
	var g errgroup.Group
	for _, n := range nodes {
		g.Go(func() error { return podman.ContainerRestart(t.Context(), n.ID, container.StopOptions{}) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("restarting the nodes through Podman: %v", err)
	}
	res := run(t, nil, "status", "--config", l.path)
	if res.code != 1 || !strings.Contains(res.output, "degraded") || !strings.Contains(res.output, "in old netns") {
		t.Fatalf("status after Podman restarted the nodes: exit %d, want 1 with the PFs in their old netns:\n%s", res.code, res.output)
	}
	if res := run(t, nil, "repair", "--config", l.path); res.code != 0 {
		t.Fatalf("repair on Podman failed:\n%s", res.output)
	}
	if res := run(t, nil, "status", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "healthy") {
		t.Fatalf("status after repair: exit %d, want 0 and healthy:\n%s", res.code, res.output)
	}
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Fatalf("verify after repair on Podman failed:\n%s", res.output)
	}
}

// killAfter runs the command with args and SIGKILLs it after d, unless it
// finished before.
func killAfter(t *testing.T, d time.Duration, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait's exit status is no failure (killed, or a command that met an
	// earlier kill's leftovers); anything else it reports is.
	waited := func(err error) {
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("waiting for %s: %v", args[0], err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		waited(err)
		t.Logf("%s finished before the kill at %s", args[0], d)
	case <-time.After(d):
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("killing %s: %v", args[0], err)
		}
		waited(<-done)
		t.Logf("%s killed after %s", args[0], d)
	}
}
