package guest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	sl "github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/test/kernel/guest"
)

// BinEnv names the guest path of the sriov-lane binary the host put in.
const BinEnv = "SRIOV_LANE_BIN"

func sriovLane(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	guest.Require(t)
	bin := os.Getenv(BinEnv)
	if bin == "" {
		t.Skip(BinEnv + " unset: the host test passes the sriov-lane binary in")
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	return o.String(), e.String(), code
}

// check on the guest finds both igb PFs (discovery asks netlink for the
// route family only: the guest has no xfrm_user or nfnetlink module),
// each with driver igb, totalvfs 7, emulated with what QEMU's igb lacks.
// check fails on what the guest lacks (Docker, the k3s image): only its
// PF part is asserted.
func TestCheckReportsIGBPFs(t *testing.T) {
	pfs := igbPFs(t)
	out, errOut, code := sriovLane(t, "check", "-o", "json", "--state-dir", t.TempDir())
	var res []sl.CheckResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check -o json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	byName := map[string]sl.CheckResult{}
	for _, r := range res {
		byName[r.Name] = r
	}
	for _, pf := range pfs {
		r, ok := byName["pf "+pf.Name]
		if !ok || r.PF == nil {
			t.Errorf("check has no line for %s:\n%s", pf, out)
			continue
		}
		p := r.PF
		if r.Status != sl.Pass || p.Driver != "igb" || p.TotalVFs != 7 || !p.Emulated || p.Emulation != "QEMU igb (Intel 82576)" || len(p.EmulationLacks) == 0 {
			t.Errorf("check line for %s: %s %q %+v", pf, r.Status, r.Message, *p)
		}
		if !strings.Contains(r.Message, "emulated: QEMU igb") {
			t.Errorf("check's text for %s does not say it is emulated: %q", pf, r.Message)
		}
	}
	if r := byName["pfs"]; r.Status != sl.Pass {
		t.Errorf("pfs: %s %q", r.Status, r.Message)
	}
	var lines []string
	for _, r := range res {
		lines = append(lines, string(r.Status)+" "+r.Name+": "+r.Message)
	}
	guest.Record(t, "check", map[string]any{"exit": code, "lines": lines})
}

// plan --vf-driver netdevice selects the discovered igb PFs by name and
// no fixed list of VF drivers, so the igbvf VFs they get join the pool.
func TestPlanNetdeviceSelectsIGBPFs(t *testing.T) {
	pfs := igbPFs(t)
	out, errOut, code := sriovLane(t, "plan", "--vf-driver", "netdevice", "-o", "json", "--state-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("plan exited %d:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "placeholder") {
		t.Errorf("plan found no PFs: %s", errOut)
	}
	var doc struct {
		Objects struct {
			Items []struct {
				Kind     string                `json:"kind"`
				Metadata struct{ Name string } `json:"metadata"`
				Data     map[string]string     `json:"data"`
			} `json:"items"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("plan -o json: %v", err)
	}
	var dp *cni.DPConfig
	for _, o := range doc.Objects.Items {
		if o.Kind == "ConfigMap" && o.Metadata.Name == cni.DevicePluginConfigMap {
			dp = &cni.DPConfig{}
			if err := json.Unmarshal([]byte(o.Data[cni.DevicePluginConfigKey]), dp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dp == nil || len(dp.ResourceList) != 1 || len(dp.ResourceList[0].Selectors) != 1 {
		t.Fatalf("no device plugin config with one selector in plan's objects: %+v", dp)
	}
	sel := dp.ResourceList[0].Selectors[0]
	var want []string
	for _, pf := range pfs {
		want = append(want, pf.Name)
	}
	got := slices.Clone(sel.PFNames)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(sel.Drivers) != 0 {
		t.Errorf("device plugin selector %+v, want pfNames %v and no drivers", sel, want)
	}
	guest.Record(t, "plan-netdevice-selector", sel)
}
