package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Slots held at once give prefix-free names and distinct ports, within the
// limits the names have.
func TestSlotsHandOutPrefixFreeNamesAndDistinctPorts(t *testing.T) {
	held := []*Slot{TakeSlot(t), TakeSlot(t), TakeSlot(t)}
	var names []string
	ports := map[int]bool{}
	for _, s := range held {
		names = append(names, s.RigPrefix(), s.Lane(0), s.Lane(9))
		for range portsPerSlot {
			p := s.Port(t)
			if ports[p] || p < portBase || p >= portBase+slots*portsPerSlot {
				t.Errorf("port %d handed out twice or outside the slots' range", p)
			}
			ports[p] = true
		}
	}
	for i, a := range names {
		for j, b := range names {
			if i != j && strings.HasPrefix(b, a) {
				t.Errorf("%q is a prefix of %q", a, b)
			}
		}
	}
	// The longest VF netdev name a rig of the last slot makes (PF 9, VF
	// 255) must fit IFNAMSIZ - 1.
	last := &Slot{n: slots - 1}
	if vf := last.RigPrefix() + "9v255"; len(vf) > 15 {
		t.Errorf("VF netdev name %q has %d bytes, more than 15", vf, len(vf))
	}
	if l := "k3d-" + last.Lane(9) + "-agent-15"; len(last.Lane(9)) > 32 || len(l) > 63 {
		t.Errorf("lane name %q too long", last.Lane(9))
	}
}

// A kept slot stays locked after its test ends, through garbage
// collections, and a slot not kept is let go. Whether the freed slot is free
// is read from this process's open files, not by taking its lock: another
// package's test may take it the moment it is free (CI once saw that).
func TestKeptSlotStaysLocked(t *testing.T) {
	var kept, freed *Slot
	t.Run("keeps", func(t *testing.T) { kept = TakeSlot(t); kept.Keep() })
	t.Run("frees", func(t *testing.T) { freed = TakeSlot(t) })
	runtime.GC()
	runtime.GC()

	f, err := openLockFile(strconv.Itoa(kept.n))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	f.Close() // drops the lock this test may have taken
	if !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("kept slot %d: not locked (flock: %v)", kept.n, err)
	}
	if !holdsOpen(t, kept.n) {
		t.Errorf("kept slot %d: this process holds no descriptor of its lock file", kept.n)
	}
	// flock(2) drops the lock with the last descriptor of the open file.
	if holdsOpen(t, freed.n) {
		t.Errorf("freed slot %d: this process still holds a descriptor of its lock file", freed.n)
	}
}

// holdsOpen says whether a descriptor of this process names slot n's lock file.
func holdsOpen(t *testing.T, n int) bool {
	t.Helper()
	want := filepath.Join(slotDir, strconv.Itoa(n))
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == want {
			return true
		}
	}
	return false
}
