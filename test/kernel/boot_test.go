package kernel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/kernel/vm"
)

// bootPart is TestKernels' first share of a boot, bootcheck's guest
// tests: the guest sees the igb PFs with SR-IOV and VFIO, and a run's
// output, exit status and files come back (a second run fails on purpose).
func bootPart(check string) guestPart {
	return guestPart{
		name: "boot",
		programs: []vm.Program{
			{Name: "bootcheck", Path: check, Args: []string{"-test.v", "-test.run", "^TestGuest(IGBPFs|VFIO|Out)$"}},
			{Name: "fails", Path: check, Args: []string{"-test.run", "^TestGuestFails$"}, Env: []string{"BOOTCHECK_FAIL=1"}},
		},
		check: checkBoot,
	}
}

func checkBoot(t *testing.T, k vm.Kernel, res *vm.Result) {
	for _, m := range res.Modules {
		if m.Error != "" {
			t.Errorf("module %s: %s", m.Name, m.Error)
		}
	}
	if len(res.Modules) != len(k.Modules) {
		t.Errorf("guest loaded %d modules, want %d", len(res.Modules), len(k.Modules))
	}
	if r := runOf(t, res, "bootcheck"); r.Exit != 0 || !strings.Contains(r.Output, "--- PASS: TestGuestIGBPFs") {
		t.Errorf("bootcheck exited %d:\n%s", r.Exit, r.Output)
	}
	if r := runOf(t, res, "fails"); r.Exit != 1 || !strings.Contains(r.Output, "failing as asked") {
		t.Errorf("fails exited %d, want 1:\n%s", r.Exit, r.Output)
	}
	if got := strings.TrimSpace(string(res.Files["boot/release"])); got != k.Release {
		t.Errorf("boot/release = %q, want %q (files: %d)", got, k.Release, len(res.Files))
	}
	if !strings.Contains(res.Console, "Linux version "+k.Release) {
		t.Errorf("console holds no \"Linux version %s\"", k.Release)
	}
	if os.Getenv("SRIOV_LANE_KERNEL_LOG") == "1" {
		t.Logf("console:\n%s", res.Console)
	}
}

// TestBootFailures: a guest whose kernel dies, and one that hangs, fail
// Start with the kernel's name and the console's tail, and the hung one
// with what QEMU said of it (on one kernel: what is tested is the runner).
func TestBootFailures(t *testing.T) {
	t.Parallel()
	k := vm.RequireKernels(t)[0]
	check := vm.BuildStatic(t, "./test/kernel/internal/bootcheck", true)
	for _, tc := range []struct {
		name, env string
		timeout   time.Duration
		want      []string
	}{
		{"crash", "BOOTCHECK_CRASH=1", 0, []string{"no end record", "sysrq"}},
		// A hung guest's error says what QEMU's monitor saw (vm hang.go).
		// Its bound is the tier's wall time: the guest is silent after its
		// hang, and the kernels' boots end long before. This guest alone
		// reaches its hang in ~10 s under TCG beside the two kernels' boots
		// (the crash guest's whole run is 8 s), so 30 s, scaled, is ample.
		{"hang", "BOOTCHECK_HANG=1", bound.Scaled(30 * time.Second), []string{"QEMU killed", "run state: running", "vCPU, first: RIP=", "QEMU's CPU time over 10s", "kernel addresses on the stack", "LAPIC timer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := vm.Start(context.Background(), vm.Config{Kernel: k, Timeout: tc.timeout, Nudge: 5 * time.Second, PFs: 1,
				Programs: []vm.Program{{Name: tc.name, Path: check, Args: []string{"-test.v", "-test.run", "^TestGuest(Crash|Hang)$"}, Env: []string{tc.env}}}})
			if err == nil {
				t.Fatalf("the guest's %s went unnoticed: %+v", tc.name, res.Runs)
			}
			t.Logf("%s: %v", tc.name, err)
			want := append(tc.want, "kernel "+k.Name, "console (last lines)", "QEMU: qemu-system-x86_64 ")
			if tc.timeout != 0 {
				want = append(want, fmt.Sprintf("did not end within %s; QEMU killed", tc.timeout))
			}
			// Silent and halted for its Nudge, a hung guest is paused and
			// resumed first (vm nudge.go), which one that is only asleep
			// sleeps through. Only a guest that got to its hang was silent:
			// under load a boot has outlasted 45 s.
			if tc.name == "hang" {
				if res != nil && strings.Contains(res.Console, "guest-init: run hang") {
					want = append(want, "nudged before (nudge.go)", "of silence the vCPU was halted", "paused and resumed it")
				} else {
					t.Logf("the guest did not get to its hang within %s (a starved boot): its nudge is not checked this run", tc.timeout)
				}
			}
			for _, want := range want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
