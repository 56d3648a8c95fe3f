package sriov_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Placements are the PFs moved and not moved back (VF netdevs are not
// placements), with the PF as discovery found it and the VFs made on it,
// whoever asks: the post-up and pre-down hooks get the same answer.
func TestPlacementsFromTheJournal(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	found := sriov.PF{Name: "ens1f0", PCI: "0000:3b:00.0", MAC: "aa:bb:cc:dd:ee:01", Driver: "ice", TotalVFs: 8, Present: true}
	pf := sriov.MoveRecord{Function: "PF", PCI: found.PCI, MAC: found.MAC, Name: found.Name, MovedAs: "ens1f0",
		Target: sriov.TargetSpec{Kind: "pinned", Path: "/p", Name: "k3d-sriov-agent-0"}, TargetDesc: "k3d-sriov-agent-0", PF: &found}
	vf := pf
	vf.Function, vf.PCI, vf.Name, vf.PF = "VF", "0000:3b:02.0", "ens1f0v0", nil
	gone := pf
	gone.PCI, gone.Name, gone.PF = "0000:3c:00.0", "ens2f0", nil
	old := pf // written before moves recorded the PF
	old.PCI, old.Name, old.MovedAs, old.PF, old.TargetDesc = "0000:3d:00.0", "ens3f0", "sl0123abcd", nil, "k3d-sriov-agent-1"
	begin := func(op string, rec any) *journal.Entry {
		t.Helper()
		e, err := j.Begin(op, rec)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, r := range []sriov.MoveRecord{pf, vf, gone, old} {
		begin(sriov.OpMove, r)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.MarkUndone(j.Pending()[1], "")) // gone's move
	must(j.Done(begin(sriov.OpNumVFs, sriov.NumVFsRecord{PCI: found.PCI, Count: 6})))
	undone := begin(sriov.OpNumVFs, sriov.NumVFsRecord{PCI: old.PCI, Count: 4})
	must(j.Done(undone))
	must(j.MarkUndone(undone, ""))
	begin(sriov.OpNumVFs, sriov.NumVFsRecord{PCI: old.PCI, Count: 5}) // intent only

	got := sriov.Placements(j.Entries())
	b, _ := json.Marshal(got)
	want := `[{"pf":{"name":"ens1f0","pci":"0000:3b:00.0","vendor":"","device":"","driver":"ice","totalVFs":8,"numVFs":0,"mac":"aa:bb:cc:dd:ee:01","numaNode":0,"present":true,"adminUp":false,"defaultRoute":false,"globalAddress":false,"emulated":false},"node":"k3d-sriov-agent-0","nameInNode":"ens1f0","vfs":6},` +
		`{"pf":{"name":"ens3f0","pci":"0000:3d:00.0","vendor":"","device":"","driver":"","totalVFs":0,"numVFs":0,"mac":"aa:bb:cc:dd:ee:01","numaNode":0,"present":false,"adminUp":false,"defaultRoute":false,"globalAddress":false,"emulated":false},"node":"k3d-sriov-agent-1","nameInNode":"sl0123abcd","vfs":0}]`
	if string(b) != want {
		t.Fatalf("placements\n got %s\nwant %s", b, want)
	}

	// down times PF returns alone: a VF netdev's move is not one.
	var pfMoves []bool
	for _, e := range j.Entries() {
		pfMoves = append(pfMoves, sriov.IsPFMove(&e))
	}
	if wantMoves := []bool{true, false, true, true, false, false, false}; !slices.Equal(pfMoves, wantMoves) {
		t.Errorf("IsPFMove over the journal: %v, want %v", pfMoves, wantMoves)
	}
}
