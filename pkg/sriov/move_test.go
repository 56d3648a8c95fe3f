package sriov_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/sriovtest"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func discover(t *testing.T, r *rig.Rig) []sriov.PF {
	t.Helper()
	pfs, err := sriov.Discover(sriov.Sysfs{Root: r.State.SysfsRoot})
	if err != nil {
		t.Fatal(err)
	}
	return pfs
}

// TestMoveIntoNetnsAndBack moves an UP PF with a custom MTU and a DOWN PF
// into a netns and back: both come back named, sized and up/down as found.
func TestMoveIntoNetnsAndBack(t *testing.T) {
	r := slotRig(t, 2)
	target := targetNetns(t, r, "move")
	pf0, _ := netlink.LinkByName(r.State.PFs[0].Name)
	if err := netlink.LinkSetMTU(pf0, 1400); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(pf0); err != nil {
		t.Fatal(err)
	}
	pfs := discover(t, r)
	before := []linkState{findByMAC(t, "", pfs[0].MAC), findByMAC(t, "", pfs[1].MAC)}
	if !before[0].Up || before[0].MTU != 1400 || before[1].Up {
		t.Fatalf("set-up failed: %+v", before)
	}
	j := openJournal(t)
	s := newSession(t, r, j)
	for _, pf := range pfs {
		name, err := s.MovePF(testCtx(t), pf, target)
		if err != nil {
			t.Fatal(err)
		}
		got := findByMAC(t, string(target), pf.MAC)
		if !got.Found || got.Name != pf.Name || !got.Up {
			t.Fatalf("%s in target: %+v (returned name %s)", pf, got, name)
		}
		if findByMAC(t, "", pf.MAC).Found {
			t.Fatalf("%s still in the host netns", pf)
		}
	}
	// Moving again is a no-op.
	if _, err := s.MovePF(testCtx(t), pfs[0], target); err != nil {
		t.Fatalf("second move: %v", err)
	}
	reverse(t, j, s.Restorer())
	// Undo is idempotent: a second pass over the same entries changes nothing.
	undo := sriov.Undoers(s.Restorer())
	for _, e := range j.Entries() {
		if _, err := undo[e.Op](testCtx(t), &e); err != nil {
			t.Fatalf("second undo of %s: %v", e.Op, err)
		}
	}
	for i, pf := range pfs {
		if got := findByMAC(t, "", pf.MAC); got != before[i] {
			t.Errorf("%s after return: %+v, want %+v", pf, got, before[i])
		}
	}
}

// TestCollisionRenameAndRestore: the target already has a link with the
// PF's name; the PF goes in under its collision name and comes back under
// its own.
func TestCollisionRenameAndRestore(t *testing.T) {
	r := slotRig(t, 1)
	target := targetNetns(t, r, "coll")
	pfs := discover(t, r)
	h := squat(t, string(target), pfs[0].Name)
	j := openJournal(t)
	s := newSession(t, r, j)
	name, err := s.MovePF(testCtx(t), pfs[0], target)
	if err != nil {
		t.Fatal(err)
	}
	want := sriov.CollisionName(pfs[0].PCI)
	if got := findByMAC(t, string(target), pfs[0].MAC); name != want || got.Name != want {
		t.Fatalf("PF in target named %q (reported %q), want %q", got.Name, name, want)
	}
	var ops []string
	for _, e := range j.Entries() {
		ops = append(ops, e.Op)
	}
	if strings.Join(ops, ",") != "sriov.rename,sriov.move" {
		t.Fatalf("journal ops %v", ops)
	}
	reverse(t, j, s.Restorer())
	if got := findByMAC(t, "", pfs[0].MAC); got.Name != pfs[0].Name {
		t.Fatalf("PF back as %+v, want name %s", got, pfs[0].Name)
	}
	if _, err := h.LinkByName(pfs[0].Name); err != nil {
		t.Fatalf("squatter in target disturbed: %v", err)
	}
}

// TestMoveIntoContainer moves PFs into a running container and returns
// them with a fresh Restorer (as a new process would), then checks that a
// removed container leaves a note instead of failing.
func TestMoveIntoContainer(t *testing.T) {
	cli := testutil.RequireDocker(t)
	r := slotRig(t, 2)
	ctx := testCtx(t)
	if err := sriovtest.EnsureSleeperImage(ctx, cli); err != nil {
		t.Fatal(err)
	}
	names := []string{r.State.Prefix + "-sleeper-0", r.State.Prefix + "-sleeper-1"}
	var ids []string
	for _, n := range names {
		t.Cleanup(func() { _ = sriovtest.RemoveContainer(ctx, cli, n) })
		id, err := sriovtest.RunSleeper(ctx, cli, n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	pfs := discover(t, r)
	j := openJournal(t)
	s := newSession(t, r, j)
	s.Docker = cli
	for i, pf := range pfs {
		if _, err := s.MovePF(ctx, pf, sriov.ContainerTarget{ID: ids[i], Docker: cli}); err != nil {
			t.Fatal(err)
		}
		info, err := cli.ContainerInspect(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := findByMAC(t, fmt.Sprintf("/proc/%d/ns/net", info.State.Pid), pf.MAC); !got.Found || !got.Up {
			t.Fatalf("%s not up in container %s: %+v", pf, names[i], got)
		}
	}
	// Container 1 is removed before down: its veth stand-in dies with it.
	if err := sriovtest.RemoveContainer(ctx, cli, names[1]); err != nil {
		t.Fatal(err)
	}
	notes := reverse(t, j, sriov.Restorer{Sysfs: s.Sysfs, Docker: cli})
	if got := findByMAC(t, "", pfs[0].MAC); !got.Found || got.Name != pfs[0].Name {
		t.Fatalf("%s not back: %+v", pfs[0], got)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "PF "+pfs[1].Name+" ("+pfs[1].PCI+") not found") || !strings.Contains(joined, "is gone") {
		t.Fatalf("notes do not report the lost stand-in PF: %q", notes)
	}
}

// TestStopBetweenRenameAndMoveRestoresAdminState stops a move right after
// the collision rename (as a kill -9 there would): the PF is still on the
// host, renamed and down, and the undo must give back its name AND its up
// state.
func TestStopBetweenRenameAndMoveRestoresAdminState(t *testing.T) {
	r := slotRig(t, 1)
	target := targetNetns(t, r, "upst")
	pfs := discover(t, r)
	pf0, _ := netlink.LinkByName(pfs[0].Name)
	if err := netlink.LinkSetUp(pf0); err != nil {
		t.Fatal(err)
	}
	squat(t, string(target), pfs[0].Name)
	j := openJournal(t)
	s := newSession(t, r, j)
	type stop struct{}
	s.AfterRecord = func(op string, phase journal.Phase) {
		if op == sriov.OpRename && phase == journal.Done {
			panic(stop{})
		}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stop); !ok {
					panic(p)
				}
			}
		}()
		_, err := s.MovePF(testCtx(t), pfs[0], target)
		t.Fatalf("move did not stop after the rename (it returned %v)", err)
	}()
	mid := findByMAC(t, "", pfs[0].MAC)
	if mid.Name != sriov.CollisionName(pfs[0].PCI) || mid.Up {
		t.Fatalf("after the rename the PF is %+v, want renamed and down", mid)
	}
	reverse(t, j, s.Restorer())
	if got := findByMAC(t, "", pfs[0].MAC); got.Name != pfs[0].Name || !got.Up {
		t.Fatalf("PF back as %+v, want %s and up", got, pfs[0].Name)
	}
}

// TestMoveOfAnEarlierBootReturnsHere: a netns is named by its nsfs inode,
// which means nothing once the host has rebooted. A move recorded in
// another boot returns its PF to the current netns (with a note) even
// though the recorded origin is not this one; a move of this boot (or of
// a journal that recorded no boot) still refuses to return it elsewhere.
func TestMoveOfAnEarlierBootReturnsHere(t *testing.T) {
	r := slotRig(t, 1)
	target := targetNetns(t, r, "boot")
	pfs := discover(t, r)
	j := openJournal(t)
	s := newSession(t, r, j)
	if _, err := s.MovePF(testCtx(t), pfs[0], target); err != nil {
		t.Fatal(err)
	}
	var move journal.Entry
	for _, e := range j.Entries() {
		if e.Op == sriov.OpMove {
			move = e
		}
	}
	var rec sriov.MoveRecord
	if err := move.Decode(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Boot == "" {
		t.Fatal("the move recorded no boot ID")
	}
	// The origin as another boot would have numbered it.
	rec.Origin = sriov.NetnsID{Dev: rec.Origin.Dev, Ino: rec.Origin.Ino + 1}
	undo := sriov.Undoers(sriov.Restorer{Sysfs: s.Sysfs, BootID: rec.Boot})[sriov.OpMove]
	for _, boot := range []string{rec.Boot, ""} {
		e := withRecord(t, move, withBoot(rec, boot))
		if _, err := undo(testCtx(t), &e); err == nil || !strings.Contains(err.Error(), "was taken from") {
			t.Fatalf("move of boot %q returned to another netns: err %v", boot, err)
		}
		if !findByMAC(t, string(target), pfs[0].MAC).Found {
			t.Fatalf("refused return (boot %q) moved the PF anyway", boot)
		}
	}
	e := withRecord(t, move, withBoot(rec, "an-earlier-boot"))
	note, err := undo(testCtx(t), &e)
	if err != nil {
		t.Fatalf("move of an earlier boot: %v", err)
	}
	if !strings.Contains(note, "rebooted") {
		t.Errorf("note %q does not say the host rebooted", note)
	}
	if got := findByMAC(t, "", pfs[0].MAC); !got.Found || got.Name != pfs[0].Name {
		t.Fatalf("%s after return: %+v", pfs[0], got)
	}
	// The journal's own entry still holds this boot's origin: done.
	reverse(t, j, s.Restorer())
}

func withBoot(rec sriov.MoveRecord, boot string) sriov.MoveRecord {
	rec.Boot = boot
	return rec
}

func withRecord(t *testing.T, e journal.Entry, rec any) journal.Entry {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	e.Data = b
	return e
}
