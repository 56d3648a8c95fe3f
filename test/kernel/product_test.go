package kernel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/kernel/vm"
)

// guestProductTests are test/kernel/guest's tests that must pass in the
// guest: each is looked for by name, so one that skipped there (or was
// renamed without this list) fails here.
var guestProductTests = []string{
	"TestDiscovery",
	"TestVFIOLane",
	"TestNetdeviceLane",
	"TestOriginalVFsComeBack",
	"TestHeldByGroupAndDevice",
	"TestHeldByDeviceFDAlone",
	"TestNoDeviceCdevs",
	"TestEmulatedIGBVFSettings",
	"TestCheckReportsIGBPFs",
	"TestPlanNetdeviceSelectsIGBPFs",
	"TestFleetPFBackFromADeadPod",
}

// productPart is TestKernels' share of a boot for test/kernel/guest's tests
// of pkg/sriov and of `sriov-lane check` and `plan` (a static sriov-lane
// put in the guest): it fails with the guest's output when any fails, and
// logs what the kernel did (the facts the guest tests record).
func productPart(k vm.Kernel, tests, bin string) guestPart {
	files := map[string]string{"/bin/sriov-lane": bin}
	env := []string{"SRIOV_LANE_BIN=/bin/sriov-lane"}
	if cfg := kernelConfig(k); cfg != "" {
		files["/boot/config-"+k.Release] = cfg
		env = append(env, "SRIOV_LANE_KERNEL_CONFIG=/boot/config-"+k.Release)
	}
	return guestPart{
		name:  "product",
		files: files,
		programs: []vm.Program{{
			Name: "guest", Path: tests, Env: env,
			// TestDocFileMap reads the package's source, which the guest lacks.
			// The bound is the guest's own, under vm.DefaultTimeout so a
			// hang still comes back as a Go panic with every goroutine,
			// and leaves the scenario its time: the guest had run 12m41s
			// when its tests passed, niced beside make test's lanes and
			// other work, close to the 12 min this once was.
			Args: []string{"-test.v", "-test.skip", "^TestDocFileMap$", "-test.timeout", "20m"},
		}},
		check: checkProduct,
	}
}

func checkProduct(t *testing.T, k vm.Kernel, res *vm.Result) {
	if kernelConfig(k) == "" {
		t.Logf("%s: no config-%s next to %s: the guest checks /dev and sysfs for VFIO cdevs and iommufd, not the config", k.Name, k.Release, k.Vmlinuz)
	}
	r := runOf(t, res, "guest")
	logFacts(t, res.Files)
	if r.Exit != 0 {
		t.Fatalf("%s (%s): the guest tests exited %d after %s:\n%s", k.Name, k.Release, r.Exit, r.Duration, r.Output)
	}
	for _, name := range guestProductTests {
		if !strings.Contains(r.Output, "--- PASS: "+name+" ") {
			t.Errorf("%s: %s did not pass in the guest:\n%s", k.Name, name, r.Output)
		}
	}
	t.Logf("%s (%s, %s): %d guest tests passed in %s", k.Name, k.Release, k.Package, len(guestProductTests), r.Duration.Round(100*time.Millisecond))
}

// kernelConfig is Debian's build config of k, when the kernel's assets
// hold it ("" when not).
func kernelConfig(k vm.Kernel) string {
	dir := filepath.Dir(k.Vmlinuz)
	for _, p := range []string{filepath.Join(dir, "config-"+k.Release), filepath.Join(dir, "config")} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// logFacts logs the facts test/kernel/guest recorded (guest.Record:
// name.json at the top of the out directory), not the other owners' files
// (bootcheck's boot/, the scenario's transcript).
func logFacts(t *testing.T, files map[string][]byte) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		if !strings.Contains(n, "/") && n != scenarioFile {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("guest fact %s: %s", n, strings.TrimSpace(string(files[n])))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
