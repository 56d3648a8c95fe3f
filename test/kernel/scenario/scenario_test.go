package scenario_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/kernel/scenario"
)

// TestGuestScenario is the guest's entry point: the scenario on the real
// kernel, its transcript left in $SRIOV_LANE_GUEST_OUT/scenario.json for
// the host test (test/kernel scenario_test.go) to compare.
func TestGuestScenario(t *testing.T) {
	if os.Getenv("SRIOV_LANE_GUEST") != "1" {
		t.Skip("runs only inside the kernel tier's QEMU guest (test/kernel)")
	}
	env, err := scenario.NewReal()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := scenario.Run(t.Context(), env)
	if tr != nil {
		logTranscript(t, tr)
		if werr := scenario.WriteJSON(filepath.Join(os.Getenv("SRIOV_LANE_GUEST_OUT"), "scenario.json"), tr); werr != nil {
			t.Error(werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

func logTranscript(t *testing.T, tr *scenario.Transcript) {
	t.Helper()
	for _, s := range tr.Steps {
		t.Logf("%s: %s %s -> %s", s.Name, s.Op, strings.Join(s.Args, " "), s.Result)
	}
}

// The child TestScenarioFake starts in a netns of its own.
func TestScenarioFakeChild(t *testing.T) { scenario.FakeChild(t) }

// The fake, run alone, shows the kernel facts the field notes measured on
// 6.1 and 6.12 (section 2): the errnos of the stores, driver_override's
// "(null)", autoprobe, and what blocks a vfio-pci VF's removal (a held
// device, not an open group). test/kernel compares it with the kernels
// themselves, all of it.
func TestScenarioFake(t *testing.T) {
	tr := scenario.RunFake(t, "TestScenarioFakeChild")
	logTranscript(t, tr)
	steps := map[string]scenario.Step{}
	for _, s := range tr.Steps {
		steps[s.Name] = s
	}
	for _, c := range []struct {
		step, key, want string // key "" is the result
	}{
		{"fresh PF", "pf0.totalvfs", "7"},
		{"fresh PF", "pf0.autoprobe", "1"},
		{"numvfs 0 -> 2, autoprobe on", "", "ok"},
		{"numvfs 0 -> 2, autoprobe on", "pf0.vf1.driver", "igbvf"},
		{"numvfs 0 -> 2, autoprobe on", "pf0.vf1.netdev", "yes"},
		{"numvfs 0 -> 2, autoprobe on", "pf0.vf0.override", "(null)"},
		{"numvfs 2 -> 3", "", "EBUSY"},
		{"numvfs 2 -> totalvfs+1", "", "ERANGE"},
		{"numvfs 2 -> 2", "", "ok"},
		{"numvfs 0 -> 2, autoprobe off", "pf0.vf0.driver", ""},
		{"numvfs 0 -> 2, autoprobe off", "pf0.vf0.netdev", "no"},
		{"drivers_probe vf0", "pf0.vf0.driver", "vfio-pci"},
		{"drivers_probe vf0", "pf0.vf0.group", "yes"},
		{"bind of a bound vf0", "", "EBUSY"},
		{"unbind vf0 from vfio-pci", "pf0.vf0.group", "no"},
		{"bind vf1 to vfio-pci without override", "", "ENODEV"},
		{"clear override vf0", "pf0.vf0.override", "(null)"},
		{"group open: numvfs 2 -> 0", "", "ok"},
		{"device held: numvfs 2 -> 0", "", "blocked"},
		{"device held: let the device go", "pending write", "ok"},
		{"device held: let the device go", "pf0.numvfs", "0"},
		{"device fd alone: numvfs 2 -> 0", "", "blocked"},
		{"device fd alone: let the device go", "pending write", "ok"},
		{"group open: a second open", "", "EBUSY"},
		{"device held, unbind: unbind vf0 from vfio-pci", "", "blocked"},
		{"device held, unbind: let the device go", "pending write", "ok"},
		{"device held, unbind: let the device go", "pf0.vf0.driver", ""},
		{"netns: pf0 into the pinned netns", "net.pinned", "pf0"},
		{"netns: VF netdev into the pinned netns", "net.pinned", "pf0 pf0.vf0.netdev"},
		{"netns: VF netdev back by name", "net.home", "pf0 pf0.vf0.netdev pf1"},
		{"netns: VF netdev back by name", "net.pinned", ""},
	} {
		s, ok := steps[c.step]
		if !ok {
			t.Errorf("no step %q", c.step)
			continue
		}
		got := s.Result
		if c.key != "" {
			got = s.State[c.key]
		}
		if got != c.want {
			t.Errorf("step %q: %s = %q, want %q", c.step, keyName(c.key), got, c.want)
		}
	}
}

func keyName(k string) string {
	if k == "" {
		return "result"
	}
	return k
}

// Compare pairs steps by position and name and reports every field that
// differs, and stops at the first unpaired step.
func TestCompare(t *testing.T) {
	a := &scenario.Transcript{Steps: []scenario.Step{
		{Name: "one", Op: "write", Args: []string{"x", "1"}, Result: "ok", State: map[string]string{"k": "1", "only-real": "x"}},
		{Name: "two", Op: "write", Result: "EBUSY"},
		{Name: "three", Op: "write", Result: "ok"},
	}}
	b := &scenario.Transcript{Steps: []scenario.Step{
		{Name: "one", Op: "write", Args: []string{"x", "1"}, Result: "blocked", State: map[string]string{"k": "2"}},
		{Name: "two", Op: "write", Result: "EBUSY"},
		{Name: "other", Op: "write", Result: "ok"},
	}}
	var got []string
	for _, d := range scenario.Compare(a, b) {
		got = append(got, d.String())
	}
	want := []string{
		`step "one", result: real "ok", fake "blocked"`,
		`step "one", state k: real "1", fake "2"`,
		`step "one", state only-real: real "x", fake "<absent>"`,
		`step "#2", step: real "three", fake "other"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Compare:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
