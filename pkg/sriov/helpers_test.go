package sriov_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(2*time.Minute))
	t.Cleanup(cancel)
	return ctx
}

// slotRig is a rig of n PFs named with the prefix of a test slot of the
// test's own (testutil.TakeSlot), so tests running at once never share a
// link or netns name.
func slotRig(t *testing.T, n int) *rig.Rig {
	t.Helper()
	return rig.NewForTest(t, n, testutil.TakeSlot(t).RigPrefix())
}

// targetNetns is the test's netns <r's prefix>-<role> (nsutil.ForTest), as
// a target to move PFs into.
func targetNetns(t *testing.T, r *rig.Rig, role string) sriov.PathTarget {
	t.Helper()
	name := r.State.Prefix + "-" + role
	nsutil.ForTest(t, name)
	return sriov.PathTarget(nsutil.Path(name))
}

// openJournal opens a fresh journal in a temp state dir.
func openJournal(t *testing.T) *journal.Journal {
	t.Helper()
	stateDir := t.TempDir()
	j, err := journal.Open(filepath.Join(stateDir, "lane", "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func newSession(t *testing.T, r *rig.Rig, j *journal.Journal) *sriov.Session {
	return &sriov.Session{Journal: j, Sysfs: sriov.Sysfs{Root: r.State.SysfsRoot}, Log: log.NewPrinter(t.Output(), true)}
}

// reverse undoes the journal and returns the notes.
func reverse(t *testing.T, j *journal.Journal, d sriov.Restorer) []string {
	t.Helper()
	var notes []string
	err := journal.Reverse(testCtx(t), j, sriov.Undoers(d), journal.ReverseOptions{
		Report: func(e *journal.Entry, note string, err error) {
			if note != "" {
				notes = append(notes, e.Op+": "+note)
			}
		},
	})
	if err != nil {
		t.Fatalf("reverse: %v", err)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("%d entries still pending after reverse", len(p))
	}
	return notes
}

// linkState is what a test compares before and after.
type linkState struct {
	Name  string
	MTU   int
	Up    bool
	Found bool
}

// findByMAC reports the link with mac in the netns at path ("" = current).
func findByMAC(t *testing.T, nsPath, mac string) linkState {
	t.Helper()
	links, err := nsutil.LinkList(testutil.HandleAt(t, nsPath))
	if err != nil {
		t.Fatal(err)
	}
	l := testutil.LinkWithMAC(links, mac)
	if l == nil {
		return linkState{}
	}
	a := l.Attrs()
	return linkState{Name: a.Name, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0, Found: true}
}

// moveLinkTo moves the link with mac from the current netns into the netns
// at path (test set-up, not journalled).
func moveLinkTo(t *testing.T, mac, path string) {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	links, err := nsutil.LinkList(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := testutil.LinkWithMAC(links, mac)
	if l == nil {
		t.Fatalf("no link with MAC %s to move", mac)
	}
	if err := netlink.LinkSetNsFd(l, int(ns)); err != nil {
		t.Fatal(err)
	}
}

// squat adds a bridge named name inside the netns at path, so a PF of that
// name collides there. It returns a handle in that netns (closed by the
// test's cleanup); deleting the netns removes the bridge.
func squat(t *testing.T, path, name string) *netlink.Handle {
	t.Helper()
	h := testutil.HandleAt(t, path)
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return h
}
