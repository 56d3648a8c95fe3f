package cmd

import (
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/smoke"
)

// verify's --help lists every check it prints and what happens to the
// smoke pod afterwards.
func TestVerifyHelpNamesEveryCheckAndCleanup(t *testing.T) {
	code, out := runCLI(t, "verify", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{
		smoke.CheckPodReady, smoke.CheckPCIDeviceEnv, smoke.CheckVFIODevice, smoke.CheckNetworkStatus, smoke.CheckPodInterface,
		smoke.Subnet, smoke.PCIDeviceEnvName("kubevirt.io", "sriov_net"),
		"deletes the pod, waits until it is gone", "--keep",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verify --help lacks %q:\n%s", want, out)
		}
	}
}

// A lane that was never brought up fails before anything is applied.
func TestVerifyWithoutLaneFails(t *testing.T) {
	code, out := runCLI(t, "verify", "--state-dir", t.TempDir(), "--keep")
	if code != 1 || !strings.Contains(out, "(is the lane up?)") {
		t.Fatalf("exit %d without a lane: %s", code, out)
	}
}
