package kernel_test

import (
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

// The child TestKernels starts in a netns of its own to run
// the scenario on the fake.
func TestScenarioFakeChild(t *testing.T) { scenario.FakeChild(t) }

// scenarioFile is the transcript the guest's scenario leaves in the out
// directory (test/kernel/scenario's TestGuestScenario).
const scenarioFile = "scenario.json"

// scenarioPart is TestKernels' share of a boot for the scenario
// (test/kernel/scenario): its check stores the guest's transcript in
// *real, for compareScenarios.
func scenarioPart(bin string, real **scenario.Transcript) guestPart {
	return guestPart{
		name:     "scenario",
		programs: []vm.Program{{Name: "scenario", Path: bin, Args: []string{"-test.v", "-test.run", "^TestGuestScenario$"}}},
		check: func(t *testing.T, k vm.Kernel, res *vm.Result) {
			r := runOf(t, res, "scenario")
			if r.Exit != 0 {
				t.Fatalf("the guest scenario exited %d:\n%s", r.Exit, r.Output)
			}
			t.Logf("guest:\n%s", r.Output)
			b, ok := res.Files[scenarioFile]
			if !ok {
				t.Fatalf("the guest left no %s (files: %d)", scenarioFile, len(res.Files))
			}
			var tr scenario.Transcript
			if err := json.Unmarshal(b, &tr); err != nil {
				t.Fatalf("decoding the guest's transcript: %v", err)
			}
			if tr.Where != k.Release {
				t.Errorf("transcript from kernel %q, want %q", tr.Where, k.Release)
			}
			*real = &tr
		},
	}
}

// compareScenarios compares each kernel's scenario transcript with the
// fake's step by step: every difference must be one of scenarioExceptions,
// and every exception must still be needed by some kernel (a fixed fake
// makes its exception go).
func compareScenarios(t *testing.T, kernels []vm.Kernel, reals []*scenario.Transcript, fake *scenario.Transcript) {
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

func exceptionFor(d scenario.Diff) (scenarioException, bool) {
	for _, e := range scenarioExceptions {
		if e.Step == d.Step && (e.Key == d.Key || strings.HasSuffix(e.Key, "*") && strings.HasPrefix(d.Key, strings.TrimSuffix(e.Key, "*"))) {
			return e, true
		}
	}
	return scenarioException{}, false
}
