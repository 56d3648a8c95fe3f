package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/kernel/scenario"
	"github.com/sriov-lane/sriov-lane/test/kernel/vm"
)

// scenarioException is a difference between a real kernel's scenario
// transcript and the fake's that is understood: the step, what differs
// (Compare's key: "result", "state <key>", ...) and why it may.
type scenarioException struct {
	Step, Key, Why string
}

// A veth cannot come back to the init netns as a physical device does: it
// is destroyed with its netns (torvalds/linux net/core/dev.c
// default_device_exit_net moves only devices without rtnl_link_ops
// netns_refund or dellink; veth's dellink destroys the pair).
const vethDies = "when a netns dies, a physical PF returns to init_net (renamed devN when its name is taken there, field notes section 2); the rig's stand-in PF is a veth, which is destroyed with the netns instead: the rig cannot show the return"

var scenarioExceptions = []scenarioException{
	{"unpinned netns dies: pf0: its last task exits", "result", vethDies},
	{"unpinned netns dies: pf0: its last task exits", "state net.home", vethDies},
	{"unpinned netns dies: pf1, its name taken: its last task exits", "result", vethDies},
	{"unpinned netns dies: pf1, its name taken: its last task exits", "state net.home", vethDies},
}

// The child TestScenarioMatchesKernels starts in a netns of its own to run
// the scenario on the fake.
func TestScenarioFakeChild(t *testing.T) { scenario.FakeChild(t) }

// TestScenarioMatchesKernels runs the scenario (test/kernel/scenario) on
// the rig's fake kernel and on every guest kernel, and compares the
// transcripts step by step: every difference must be one of
// scenarioExceptions, and every exception must still be needed by some
// kernel (a fixed fake makes its exception go).
func TestScenarioMatchesKernels(t *testing.T) {
	t.Parallel()
	kernels := vm.RequireKernels(t)
	bin := vm.BuildStatic(t, "./test/kernel/scenario", true)
	// The fake and every kernel run at once; the comparison waits for all.
	var fake *scenario.Transcript
	reals := make([]*scenario.Transcript, len(kernels))
	t.Run("run", func(t *testing.T) {
		t.Run("fake", func(t *testing.T) {
			t.Parallel()
			fake = scenario.RunFake(t, "TestScenarioFakeChild")
		})
		for i, k := range kernels {
			t.Run(k.Name, func(t *testing.T) {
				t.Parallel()
				reals[i] = guestScenario(t, k, bin)
			})
		}
	})
	if t.Failed() {
		return
	}
	used := map[scenarioException]bool{}
	for i, k := range kernels {
		for _, d := range scenario.Compare(reals[i], fake) {
			e, ok := exceptionFor(d)
			if !ok {
				t.Errorf("%s: the fake differs from kernel %s (%s), and no exception says why", d, k.Name, k.Release)
				continue
			}
			used[e] = true
			t.Logf("%s: %s: expected (%s)", k.Name, d, e.Why)
		}
	}
	if t.Failed() {
		return
	}
	for _, e := range scenarioExceptions {
		if !used[e] {
			t.Errorf("exception for step %q, %s is not needed by any kernel: the fake agrees now, drop it", e.Step, e.Key)
		}
	}
}

// guestScenario boots k with the scenario's guest test and returns the
// transcript it left.
func guestScenario(t *testing.T, k vm.Kernel, bin string) *scenario.Transcript {
	t.Helper()
	res, err := vm.Start(context.Background(), vm.Config{Kernel: k, PFs: 2,
		Programs: []vm.Program{{Name: "scenario", Path: bin, Args: []string{"-test.v", "-test.run", "^TestGuestScenario$"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].Exit != 0 {
		t.Fatalf("the guest scenario failed: %+v", res.Runs)
	}
	t.Logf("guest:\n%s", res.Runs[0].Output)
	b, ok := res.Files["scenario.json"]
	if !ok {
		t.Fatalf("the guest left no scenario.json (files: %d)", len(res.Files))
	}
	var real scenario.Transcript
	if err := json.Unmarshal(b, &real); err != nil {
		t.Fatalf("decoding the guest's transcript: %v", err)
	}
	if real.Where != k.Release {
		t.Errorf("transcript from kernel %q, want %q", real.Where, k.Release)
	}
	return &real
}

func exceptionFor(d scenario.Diff) (scenarioException, bool) {
	for _, e := range scenarioExceptions {
		if e.Step == d.Step && (e.Key == d.Key || strings.HasSuffix(e.Key, "*") && strings.HasPrefix(d.Key, strings.TrimSuffix(e.Key, "*"))) {
			return e, true
		}
	}
	return scenarioException{}, false
}
