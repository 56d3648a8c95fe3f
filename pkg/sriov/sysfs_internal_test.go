package sriov

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// A missing attribute is an error at once, as on real sysfs, and is never
// created.
func TestWriteFileNeverCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bind")
	if err := WriteFile(path, "x"); err == nil {
		t.Fatal("write to a missing attribute succeeded")
	}
	if _, err := os.Lstat(path); err == nil {
		t.Fatal("WriteFile created the attribute")
	}
}

// Stores take effect before the write returns, or fail it with the
// kernel's errno, which WriteFile passes on: no wait, no second write.
func TestWriteFileIsSynchronousAndKeepsTheErrno(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	sysfs.ServeForTest(t, sysfs.ServeConfig{SysfsDir: filepath.Join(dir, "sys"),
		KernelConfig: sysfs.KernelConfig{PFs: []sysfs.PF{{Name: "sxw0", MAC: "02:00:00:5e:00:01"}}}})
	sys := Sysfs{Root: filepath.Join(dir, "sys")}
	pf := sysfs.PFBDF(0)
	if err := setNumVFs(sys, pf, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sys.Attr(pf, "virtfn2")); err != nil {
		t.Fatalf("VF 2 not there when the write returned: %v", err)
	}
	if err := setNumVFs(sys, pf, 2); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("3 -> 2 VFs: want EBUSY, got %v", err)
	}
	if err := setNumVFs(sys, pf, 9); !errors.Is(err, syscall.ERANGE) {
		t.Fatalf("9 VFs of 8: want ERANGE, got %v", err)
	}
	vf := sysfs.VFBDF(pf, 0)
	if d, _ := sys.Driver(vf); d != "iavf" {
		t.Fatalf("autoprobed VF driver %q", d)
	}
	if err := unbind(sys, vf, "iavf"); err != nil {
		t.Fatal(err)
	}
	if d, _ := sys.Driver(vf); d != "" {
		t.Fatalf("driver %q when unbind returned", d)
	}
	if err := unbind(sys, vf, "iavf"); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("unbinding an unbound VF: want ENODEV, got %v", err)
	}
	if err := setNumVFs(sys, pf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sys.Attr(pf, "virtfn0")); err == nil {
		t.Fatal("virtfn0 left when the write returned")
	}
}
