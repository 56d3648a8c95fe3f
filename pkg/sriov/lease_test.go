package sriov_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

func fakePFs(n int) []sriov.PF {
	var out []sriov.PF
	for i := n - 1; i >= 0; i-- { // reverse order: allocation must sort
		out = append(out, sriov.PF{Name: fmt.Sprintf("sxf%d", i), PCI: fmt.Sprintf("0000:%02x:00.0", 0x40+i),
			MAC: fmt.Sprintf("02:00:00:00:00:%02x", i), Present: true, TotalVFs: 8})
	}
	return out
}

func laneJournal(t *testing.T, stateDir, lane string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(statedir.Dir(stateDir).Lane(lane).Journal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestAllocateRaceDisjoint(t *testing.T) {
	stateDir := t.TempDir()
	cands := fakePFs(4)
	const lanes = 2
	got := make([][]sriov.PF, lanes)
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range lanes {
		lane := fmt.Sprintf("lane%d", i)
		j := laneJournal(t, stateDir, lane)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l := sriov.NewLeaser(stateDir) // one Leaser each, as separate processes would
			got[i], errs[i] = l.Allocate(context.Background(), &sriov.Session{Journal: j}, sriov.Request{Lane: lane, Count: 2, Candidates: cands})
		}()
	}
	close(start)
	wg.Wait()
	seen := map[string]string{}
	for i := range lanes {
		if errs[i] != nil {
			t.Fatalf("lane%d: %v", i, errs[i])
		}
		for _, pf := range got[i] {
			if other, dup := seen[pf.PCI]; dup {
				t.Fatalf("%s given to both %s and lane%d", pf.PCI, other, i)
			}
			seen[pf.PCI] = fmt.Sprintf("lane%d", i)
		}
		if !sort.SliceIsSorted(got[i], func(a, b int) bool { return got[i][a].PCI < got[i][b].PCI }) {
			t.Errorf("lane%d got unsorted %v", i, got[i])
		}
	}
	if len(seen) != 4 {
		t.Fatalf("leased %d PFs, want 4", len(seen))
	}

	// A third lane finds nothing free and fails before any change.
	j3 := laneJournal(t, stateDir, "lane2")
	_, err := sriov.NewLeaser(stateDir).Allocate(context.Background(), &sriov.Session{Journal: j3},
		sriov.Request{Lane: "lane2", Count: 1, Candidates: cands, Selection: sriov.Selection{Exclude: []string{"nothing*"}}})
	if err == nil {
		t.Fatal("third lane got a PF")
	}
	for _, want := range []string{"needs 1", "found 4", "4 leased", "lane0: 2", "lane1: 2", "0 excluded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := len(j3.Entries()); n != 0 {
		t.Errorf("failed allocation journalled %d entries", n)
	}
}

func TestLeaseReclaimAndRelease(t *testing.T) {
	stateDir := t.TempDir()
	cands := fakePFs(2)
	j0 := laneJournal(t, stateDir, "dead")
	l := sriov.NewLeaser(stateDir)
	if _, err := l.Allocate(context.Background(), &sriov.Session{Journal: j0}, sriov.Request{Lane: "dead", Count: 2, Candidates: cands}); err != nil {
		t.Fatal(err)
	}
	// The lane vanishes without a down: its journal is gone.
	j0.Close()
	if err := os.Remove(j0.Path()); err != nil {
		t.Fatal(err)
	}
	j1 := laneJournal(t, stateDir, "live")
	// Without -v: a reclaimed lease is a warning the user always sees.
	var out bytes.Buffer
	s := &sriov.Session{Journal: j1, Log: log.NewPrinter(&out, false)}
	got, err := l.Allocate(context.Background(), s, sriov.Request{Lane: "live", Count: 2, Candidates: cands})
	if err != nil {
		t.Fatalf("stale leases not reclaimed: %v", err)
	}
	msgs := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 2 || len(msgs) != 2 || !strings.Contains(msgs[0], "reclaimed") {
		t.Fatalf("got %v, messages %q", got, msgs)
	}
	leases, err := l.Leases()
	if err != nil || len(leases) != 2 || leases[got[0].PCI].Lane != "live" || leases[got[0].PCI].PID != os.Getpid() {
		t.Fatalf("leases %+v, %v", leases, err)
	}
	if err := journal.Reverse(context.Background(), j1, sriov.Undoers(sriov.Restorer{}), journal.ReverseOptions{}); err != nil {
		t.Fatal(err)
	}
	if leases, _ := l.Leases(); len(leases) != 0 {
		t.Fatalf("leases left after reverse: %+v", leases)
	}
	// Undo is idempotent: running it again on the same entries is a no-op.
	for _, e := range j1.Entries() {
		if _, err := sriov.Undoers(sriov.Restorer{})[e.Op](context.Background(), &e); err != nil {
			t.Fatalf("second undo of %s: %v", e.Op, err)
		}
	}
}
