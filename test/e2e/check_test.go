package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/docexample"
)

type checkLine struct {
	Name, Status, Message, Hint string
}

func checkJSON(t *testing.T, args ...string) (int, map[string]checkLine) {
	t.Helper()
	res := run(t, nil, append([]string{"check", "-o", "json"}, args...)...)
	var lines []checkLine
	if err := json.Unmarshal([]byte(res.output[:strings.LastIndex(res.output, "]")+1]), &lines); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, res.output)
	}
	m := map[string]checkLine{}
	for _, l := range lines {
		m[l.Name] = l
	}
	return res.code, m
}

func TestCheckOnTheRig(t *testing.T) {
	requireRig(t)
	_, r, l := rigLane(t, 2, nil)
	before := snapshot(t, r, l)
	code, m := checkJSON(t, "--config", l.path)
	if code != 0 {
		t.Errorf("check on the rig exits %d: %+v", code, m)
	}
	for _, pf := range r.State.PFs {
		c, ok := m["pf "+pf.Name]
		if !ok || c.Status != "pass" || !strings.Contains(c.Message, pf.BDF) || !strings.Contains(c.Message, "totalvfs 8") || !strings.Contains(c.Message, "i40e") {
			t.Errorf("stand-in PF %s not reported with PCI address, driver and totalvfs: %+v", pf.Name, c)
		}
	}
	if m["pfs"].Status != "pass" || !strings.Contains(m["pfs"].Message, "2 usable") {
		t.Errorf("pfs: %+v", m["pfs"])
	}
	for _, name := range []string{"root", "engine", "sysfs", "vfio-device", "vfio-pci-driver", "iommu", "api-port", "k3s-image"} {
		if m[name].Status != "pass" {
			t.Errorf("%s: %+v", name, m[name])
		}
	}
	// The README's check, as people read it: a line per check.
	res := l.example(t, docexample.Lookup(t, "bin/sriov-lane check"))
	if res.code != 0 {
		t.Errorf("check on the rig exits %d:\n%s", res.code, res.output)
	}
	for _, pf := range r.State.PFs {
		if !strings.Contains(res.output, "pf "+pf.Name) {
			t.Errorf("check does not name stand-in PF %s:\n%s", pf.Name, res.output)
		}
	}
	// Needing more PFs than the rig has fails, with counts and a hint.
	code, m = checkJSON(t, "--config", l.path, "--agents", "3")
	if code != 1 || m["pfs"].Status != "fail" || !strings.Contains(m["pfs"].Message, "need 3") || m["pfs"].Hint == "" {
		t.Errorf("3 agents on 2 PFs: exit %d %+v", code, m["pfs"])
	}
	if d := before.diff(snapshot(t, r, l)); d != "" {
		t.Errorf("check changed the host:\n%s", d)
	}
}

func TestCheckOnEmptySysfsRoot(t *testing.T) {
	testRoot := t.TempDir()
	empty := filepath.Join(testRoot, "sys")
	if err := os.MkdirAll(filepath.Join(empty, "bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, "bus/pci/drivers_probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, m := checkJSON(t, "--sysfs-root", empty, "--state-dir", filepath.Join(testRoot, "state"), "--registry=false")
	if code != 1 {
		t.Errorf("check on an empty sysfs root exits %d", code)
	}
	if m["pfs"].Status != "fail" || !strings.Contains(m["pfs"].Message, "no SR-IOV PF") || !strings.Contains(m["pfs"].Hint, "sysfs-root") {
		t.Errorf("pfs: %+v", m["pfs"])
	}
	if m["iommu"].Status != "fail" || m["iommu"].Hint == "" {
		t.Errorf("iommu: %+v", m["iommu"])
	}
	if _, err := os.Stat(filepath.Join(testRoot, "state")); !os.IsNotExist(err) {
		t.Errorf("check created its state dir")
	}
}
