package lane

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// An emulated PF is reported as such by check (text and the PF in -o json)
// and by status (text and JSON), with what the emulation lacks, so a suite
// on the lane can skip those tests.
func TestEmulatedPFReported(t *testing.T) {
	igb := PFSummary{Name: "eth0", PCI: "0000:01:00.0", Driver: "igb", TotalVFs: 7,
		EmulationReport: sriov.EmulationReport{Emulated: true, Emulation: "QEMU igb (Intel 82576)", EmulationLacks: []string{"VF link state (ip link set PF vf N state auto|enable|disable)"}}}
	real := PFSummary{Name: "ens1f0", PCI: "0000:3b:00.0", Driver: "ice", TotalVFs: 64}
	l := config.Default()
	c := &Checker{Lane: l, PFs: func(context.Context) (PFReport, error) {
		return PFReport{Usable: []PFSummary{igb, real}}, nil
	}}
	var got []CheckResult
	c.checkPFs(t.Context(), func(r CheckResult) { got = append(got, r) })
	byName := map[string]CheckResult{}
	for _, r := range got {
		byName[r.Name] = r
	}
	line, ok := byName["pf eth0"]
	if !ok || line.PF == nil {
		t.Fatalf("no pf eth0 line with its PF: %+v", got)
	}
	if !strings.Contains(line.Message, "emulated: QEMU igb (Intel 82576), lacks VF link state") {
		t.Errorf("check line does not say it is emulated and what it lacks: %q", line.Message)
	}
	if r := byName["pf ens1f0"]; r.PF == nil || r.PF.Emulated || strings.Contains(r.Message, "emulated") {
		t.Errorf("a real PF reported as emulated: %+v", r)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back []struct {
		Name string `json:"name"`
		PF   *struct {
			Emulated       bool     `json:"emulated"`
			EmulationLacks []string `json:"emulationLacks"`
		} `json:"pf"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, r := range back {
		if r.Name == "pf eth0" && (r.PF == nil || !r.PF.Emulated || len(r.PF.EmulationLacks) != 1) {
			t.Errorf("check -o json for eth0: %s", b)
		}
	}

	st := &LaneStatus{Name: "x", Health: "healthy", PFs: []PFStatus{
		{Name: "eth0", PCI: "0000:01:00.0", EmulationReport: igb.EmulationReport},
		{Name: "ens1f0", PCI: "0000:3b:00.0"},
	}}
	text := FormatStatus(st)
	if !strings.Contains(text, "emulated: PF eth0 (0000:01:00.0) is QEMU igb (Intel 82576); it lacks VF link state") || strings.Contains(text, "PF ens1f0 (0000:3b:00.0) is") {
		t.Errorf("status text:\n%s", text)
	}
	b, err = json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"emulated":true,"emulation":"QEMU igb (Intel 82576)","emulationLacks":["VF link state`) || !strings.Contains(string(b), `"name":"ens1f0","pci":"0000:3b:00.0","numVFs":0,"emulated":false`) {
		t.Errorf("status -o json: %s", b)
	}
}
