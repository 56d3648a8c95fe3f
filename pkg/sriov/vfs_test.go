package sriov_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
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
	r := rig.NewForTest(t, 1, "sx-v")
	pf := discover(t, r)[0]
	j, _ := openJournal(t)
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
	reverse(t, j, s.Deps())
	if attr(t, r, pf.PCI, "sriov_numvfs") != "0" || attr(t, r, pf.PCI, "sriov_drivers_autoprobe") != "1" {
		t.Fatalf("after release numvfs %s autoprobe %s", attr(t, r, pf.PCI, "sriov_numvfs"), attr(t, r, pf.PCI, "sriov_drivers_autoprobe"))
	}
	if _, err := os.Lstat(filepath.Join(sys.Device(pf.PCI), "virtfn0")); err == nil {
		t.Fatal("virtfn0 still present after release")
	}
}

func TestVFsNetdevice(t *testing.T) {
	r := rig.NewForTest(t, 1, "sx-n")
	target := newNetns(t, "sx-vfnd")
	pf := discover(t, r)[0]
	j, _ := openJournal(t)
	s := newSession(t, r, j)
	if _, err := s.MovePF(testCtx(t), pf, target); err != nil {
		t.Fatal(err)
	}
	vfs, err := s.ConfigureVFs(testCtx(t), pf, sriov.VFOptions{Count: 2, Mode: sriov.ModeNetdevice, Target: target})
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
	reverse(t, j, s.Deps())
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
