package lane

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Post-up and pre-down hooks are told where the PFs are by the same answer
// (pkg/sriov's, from the journal): the same SRIOV_LANE_PFS, VF counts and
// all.
func TestHooksOfBothPhasesGetTheSamePFs(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	pf := sriov.PF{Name: "ens1f0", PCI: "0000:3b:00.0", MAC: "aa:bb:cc:dd:ee:01", TotalVFs: 8}
	for _, rec := range []struct {
		op   string
		data any
	}{
		{sriov.OpMove, sriov.MoveRecord{Function: "PF", PCI: pf.PCI, MAC: pf.MAC, Name: pf.Name, MovedAs: pf.Name, TargetDesc: "k3d-sriov-agent-0", PF: &pf}},
		{sriov.OpNumVFs, sriov.NumVFsRecord{PCI: pf.PCI, Count: 6}},
	} {
		e, err := j.Begin(rec.op, rec.data)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Done(e); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	c := &Session{Lane: config.Default(), Journal: j, Log: log.NewPrinter(&out, false), Out: &out}
	seen := map[string]string{}
	for _, phase := range []string{"post-up", "pre-down"} {
		file := filepath.Join(dir, phase)
		hook := []string{"/bin/sh", "-c", `printf '%s' "$SRIOV_LANE_PFS" > "$0"`, file}
		if err := runHooks(t.Context(), c, phase, [][]string{hook}, "/kubeconfig"); err != nil {
			t.Fatalf("%s: %v\n%s", phase, err, out.String())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		seen[phase] = string(b)
	}
	want := `[{"pf":{"name":"ens1f0","pci":"0000:3b:00.0","vendor":"","device":"","driver":"","totalVFs":8,"numVFs":0,"mac":"aa:bb:cc:dd:ee:01","numaNode":0,"present":false,"adminUp":false,"defaultRoute":false,"globalAddress":false,"emulated":false},"node":"k3d-sriov-agent-0","nameInNode":"ens1f0","vfs":6}]`
	if seen["post-up"] != want || seen["pre-down"] != want {
		t.Errorf("SRIOV_LANE_PFS\npost-up  %s\npre-down %s\nwant     %s", seen["post-up"], seen["pre-down"], want)
	}
}
