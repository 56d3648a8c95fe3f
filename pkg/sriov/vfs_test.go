package sriov_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/vfiouser"
)

func attr(t *testing.T, r *rig.Rig, bdf, name string) string {
	t.Helper()
	v, err := sriov.Sysfs{Root: r.State.SysfsRoot}.ReadAttr(bdf, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVFsVFIO(t *testing.T) {
	r := slotRig(t, 1)
	pf := discover(t, r)[0]
	j := openJournal(t)
	s := newSession(t, r, j)

	if _, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 9}); err == nil {
		t.Fatal("9 VFs accepted on a device with 8")
	}
	if n := len(j.Entries()); n != 0 {
		t.Fatalf("rejected request journalled %d entries", n)
	}
	vfs, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(vfs) != 4 || attr(t, r, pf.PCI, "sriov_numvfs") != "4" || attr(t, r, pf.PCI, "sriov_drivers_autoprobe") != "0" {
		t.Fatalf("vfs %+v numvfs %s", vfs, attr(t, r, pf.PCI, "sriov_numvfs"))
	}
	sys := sriov.Sysfs{Root: r.State.SysfsRoot}
	for _, vf := range vfs {
		if d, _ := sys.Driver(vf.PCI); d != "vfio-pci" {
			t.Errorf("VF %s bound to %q", vf.PCI, d)
		}
		// A cleared override reads "(null)", as on the kernel.
		if ov := attr(t, r, vf.PCI, "driver_override"); ov != "(null)" {
			t.Errorf("VF %s driver_override left %q", vf.PCI, ov)
		}
	}
	reverse(t, j, s.Restorer())
	if attr(t, r, pf.PCI, "sriov_numvfs") != "0" || attr(t, r, pf.PCI, "sriov_drivers_autoprobe") != "1" {
		t.Fatalf("after release numvfs %s autoprobe %s", attr(t, r, pf.PCI, "sriov_numvfs"), attr(t, r, pf.PCI, "sriov_drivers_autoprobe"))
	}
	if _, err := os.Lstat(filepath.Join(sys.Device(pf.PCI), "virtfn0")); err == nil {
		t.Fatal("virtfn0 still present after release")
	}
}

func TestVFsNetdevice(t *testing.T) {
	r := slotRig(t, 1)
	target := targetNetns(t, r, "vfnd")
	pf := discover(t, r)[0]
	j := openJournal(t)
	s := newSession(t, r, j)
	if _, err := s.MovePF(testCtx(t), pf, target); err != nil {
		t.Fatal(err)
	}
	vfs, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 2, Mode: config.VFDriverNetdevice, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vfs {
		if vf.Driver != "iavf" || vf.MAC == "" {
			t.Fatalf("VF %+v", vf)
		}
		if got := findByMAC(t, string(target), vf.MAC); !got.Found || got.Name != vf.Netdev {
			t.Fatalf("VF netdev %s not in target: %+v", vf.Netdev, got)
		}
		if findByMAC(t, "", vf.MAC).Found {
			t.Fatalf("VF netdev %s still in host netns", vf.Netdev)
		}
	}
	reverse(t, j, s.Restorer())
	if attr(t, r, pf.PCI, "sriov_numvfs") != "0" {
		t.Fatal("VFs left after release")
	}
	if got := findByMAC(t, "", pf.MAC); got.Name != pf.Name {
		t.Fatalf("PF back as %+v", got)
	}
	for _, vf := range vfs {
		if got := findByMAC(t, string(target), vf.MAC); got.Found {
			t.Errorf("VF netdev %s left in target", fmt.Sprint(vf.Netdev))
		}
	}
}

// A VF whose VFIO device is held after the holder check (here by this very
// process, which the check does not count) makes the kernel block the
// unbind: the undo gives up after its bound, saying why, and the next
// reverse finishes once the device is let go. A held device fd is what
// blocks on a real kernel, not an open group file (field notes section 2;
// the rig's model of it: test/rig/sysfs Kernel, "VFIO").
func TestUndoBlockedUnbindIsBounded(t *testing.T) {
	r := slotRig(t, 1)
	pf := discover(t, r)[0]
	j := openJournal(t)
	s := newSession(t, r, j)
	vfs, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	group, err := os.Readlink(filepath.Join(sriov.Sysfs{Root: r.State.SysfsRoot}.Device(vfs[0].PCI), "iommu_group"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := vfiouser.HoldDevice(r.State.VFIODir, filepath.Base(group), vfs[0].PCI)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := s.Restorer()
	d.VFIODir, d.HolderWait = r.State.VFIODir, 500*time.Millisecond
	start := time.Now()
	err = journal.Reverse(testCtx(t), j, sriov.Undoers(d), journal.ReverseOptions{})
	if !errors.Is(err, sriov.ErrGroupHeld) || !strings.Contains(err.Error(), "blocked the write") {
		t.Fatalf("want a bounded, explained failure, got %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the undo took %s with a 500ms bound", took)
	}
	f.Close()
	// The pending unbind completes once the device is let go; the next
	// down may find it done or still in flight.
	reverse(t, j, d)
	if attr(t, r, pf.PCI, "sriov_numvfs") != "0" {
		t.Fatalf("numvfs %s after the device was let go", attr(t, r, pf.PCI, "sriov_numvfs"))
	}
}

// A PF that already had VFs when the lane took it comes back with exactly
// those: as many, bound to the drivers they had.
func TestPFWithVFsComesBackWithThem(t *testing.T) {
	r := slotRig(t, 1)
	pf := discover(t, r)[0]
	sys := sriov.Sysfs{Root: r.State.SysfsRoot}
	if err := sriov.WriteFile(sys.Attr(pf.PCI, "sriov_numvfs"), "3"); err != nil {
		t.Fatal(err)
	}
	drivers := func() []string {
		var out []string
		for i := 0; ; i++ {
			target, err := os.Readlink(filepath.Join(sys.Device(pf.PCI), fmt.Sprintf("virtfn%d", i)))
			if err != nil {
				return out
			}
			d, _ := sys.Driver(filepath.Base(target))
			out = append(out, d)
		}
	}
	before := drivers()
	if len(before) != 3 || before[0] == "" {
		t.Fatalf("set-up: VFs %v, want 3 probed by autoprobe", before)
	}
	j := openJournal(t)
	s := newSession(t, r, j)
	if _, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 4}); err != nil {
		t.Fatal(err)
	}
	reverse(t, j, s.Restorer())
	if got := drivers(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("VFs after release: drivers %v, before the lane %v", got, before)
	}
	if attr(t, r, pf.PCI, "sriov_drivers_autoprobe") != "1" {
		t.Errorf("autoprobe %s", attr(t, r, pf.PCI, "sriov_drivers_autoprobe"))
	}
}
