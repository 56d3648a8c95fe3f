package kernel_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/kernel/scenario"
	"github.com/sriov-lane/sriov-lane/test/kernel/vm"
)

// guestPart is one owner's share of a kernel's boot: the programs it adds
// to the guest (named, so each owner finds its own runs), the files they
// need in the initramfs, and its check of what came back.
type guestPart struct {
	name     string
	programs []vm.Program
	files    map[string]string
	check    func(t *testing.T, k vm.Kernel, res *vm.Result)
}

// TestKernels boots every guest kernel twice, both guests at once: one
// runs product_test.go's guest tests, the other boot_test.go's checks then
// scenario_test.go's scenario (last, since it leaves a PF renamed devN as
// a real netns death does). Each owner gets its runs as a subtest. The
// tier runs alone on the machine, and past their boots the guests mostly
// wait on the kernel (igb's resets and VF teardown, the product's bounds
// with a held VF): one boot for every owner ran them one after another,
// 82 s a kernel with the cores 10% busy; two boots end with the longer
// of the two, the product's.
func TestKernels(t *testing.T) {
	t.Parallel()
	kernels := vm.RequireKernels(t)
	check := vm.BuildStatic(t, "./test/kernel/internal/bootcheck", true)
	tests := vm.BuildStatic(t, "./test/kernel/guest", true)
	bin := vm.BuildStatic(t, "./cmd/sriov-lane", false)
	scen := vm.BuildStatic(t, "./test/kernel/scenario", true)
	// The fake's scenario runs beside the boots; the comparison waits for
	// every transcript.
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
				for _, parts := range [][]guestPart{
					{productPart(k, tests, bin)},
					{bootPart(check), scenarioPart(scen, &reals[i])},
				} {
					t.Run(guestName(parts), func(t *testing.T) {
						t.Parallel()
						bootAndCheck(t, k, parts)
					})
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	compareScenarios(t, kernels, reals, fake)
}

// guestName names a guest by its owners' parts: "boot+scenario".
func guestName(parts []guestPart) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	return strings.Join(names, "+")
}

// bootAndCheck boots kernel k once with the programs and files of every
// part, in order, and runs each part's check of what came back as a
// subtest named for the part.
func bootAndCheck(t *testing.T, k vm.Kernel, parts []guestPart) {
	cfg := vm.Config{Kernel: k, Files: map[string]string{}}
	for _, p := range parts {
		cfg.Programs = append(cfg.Programs, p.programs...)
		maps.Copy(cfg.Files, p.files)
	}
	start := time.Now()
	res, err := vm.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s, %s): booted and ran %d programs in %s", k.Name, k.Release, k.Package, len(res.Runs), time.Since(start).Round(100*time.Millisecond))
	for _, n := range res.Nudges {
		t.Logf("%s: nudged (vm nudge.go): %s", k.Name, n)
	}
	if len(res.Runs) != len(cfg.Programs) {
		t.Fatalf("%d runs came back, want %d: %+v\nconsole tail:\n%s", len(res.Runs), len(cfg.Programs), res.Runs, tail(res.Console, 40))
	}
	for _, p := range parts {
		t.Run(p.name, func(t *testing.T) { p.check(t, k, res) })
	}
}

// runOf is the run of the program named name.
func runOf(t *testing.T, res *vm.Result, name string) vm.Run {
	t.Helper()
	for _, r := range res.Runs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no run of %s came back: %+v", name, res.Runs)
	return vm.Run{}
}
