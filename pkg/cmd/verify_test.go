package cmd

import (
	"os"
	"path/filepath"
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
	outputHas(t, "verify --help", out,
		smoke.CheckPodReady, smoke.CheckPCIDeviceEnv, smoke.CheckVFIODevice, smoke.CheckNetworkStatus, smoke.CheckPodInterface,
		smoke.CheckDRAEnv, smoke.CheckClaim, smoke.DRAInterface,
		smoke.Subnet, smoke.PCIDeviceEnvName("kubevirt.io", "sriov_net"),
		"deletes the pod, waits until it is gone", "--keep",
	)
}

// A lane that was never brought up fails before anything is applied.
func TestVerifyWithoutLaneFails(t *testing.T) {
	code, out := runCLI(t, "verify", "--state-dir", t.TempDir(), "--keep")
	if code != 1 || !strings.Contains(out, "(is the lane up?)") {
		t.Fatalf("exit %d without a lane: %s", code, out)
	}
}

// A dra lane is verified as any other (through a ResourceClaimTemplate,
// test/e2e TestDRAOnTheRig): one that is not up fails as any other does,
// not with the refusal verify had before it checked dra lanes.
func TestVerifyTakesADRALane(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "lane.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nvfAllocation: dra\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "verify", "--state-dir", t.TempDir(), "--config", cfg)
	if code != 1 || !strings.Contains(out, "(is the lane up?)") || strings.Contains(out, "vfAllocation dra") {
		t.Fatalf("exit %d for a dra lane that is not up: %s", code, out)
	}
}
