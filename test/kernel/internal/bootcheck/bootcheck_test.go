package bootcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requireGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("SRIOV_LANE_GUEST") != "1" {
		t.Skip("runs only inside the kernel tier's QEMU guest (test/kernel)")
	}
}

// TestGuestIGBPFs: QEMU's igb (82576) devices are bound to the igb driver,
// which offers 7 VFs on each (torvalds/linux
// drivers/net/ethernet/intel/igb/igb_main.c@v6.1, igb_probe_vfs:
// pci_sriov_set_totalvfs(pdev, 7)).
func TestGuestIGBPFs(t *testing.T) {
	requireGuest(t)
	pfs, err := filepath.Glob("/sys/bus/pci/drivers/igb/0000:*")
	if err != nil {
		t.Fatal(err)
	}
	if len(pfs) < 2 {
		t.Fatalf("igb drives %d PCI devices (%v), want >= 2", len(pfs), pfs)
	}
	for _, pf := range pfs {
		b, err := os.ReadFile(filepath.Join(pf, "sriov_totalvfs"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != "7" {
			t.Errorf("%s sriov_totalvfs = %s, want 7", pf, got)
		}
	}
}

// TestGuestVFIO: with vfio-pci loaded, the VFIO container's character
// device exists (torvalds/linux Documentation/driver-api/vfio.rst@v6.1:
// "A container is created by simply opening the /dev/vfio/vfio
// character device").
func TestGuestVFIO(t *testing.T) {
	requireGuest(t)
	st, err := os.Stat("/dev/vfio/vfio")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/vfio/vfio is %s, want a character device", st.Mode())
	}
}

// TestGuestOut leaves a file for the host to read back.
func TestGuestOut(t *testing.T) {
	requireGuest(t)
	out := os.Getenv("SRIOV_LANE_GUEST_OUT")
	if out == "" {
		t.Fatal("SRIOV_LANE_GUEST_OUT is not set")
	}
	if err := os.MkdirAll(filepath.Join(out, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "boot", "release"), release, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGuestFails fails when asked to, so the host sees a nonzero exit
// come back.
func TestGuestFails(t *testing.T) {
	requireGuest(t)
	if os.Getenv("BOOTCHECK_FAIL") != "1" {
		t.Skip("BOOTCHECK_FAIL=1 not set")
	}
	t.Fatal("failing as asked (BOOTCHECK_FAIL=1)")
}

// TestGuestCrash crashes the guest's kernel when asked to (sysrq "c"), so
// the host sees a guest that died before its end record.
func TestGuestCrash(t *testing.T) {
	requireGuest(t)
	if os.Getenv("BOOTCHECK_CRASH") != "1" {
		t.Skip("BOOTCHECK_CRASH=1 not set")
	}
	if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0o200); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the kernel lives on after sysrq c")
}

// TestGuestHang never returns when asked to, so the host's timeout fires.
func TestGuestHang(t *testing.T) {
	requireGuest(t)
	if os.Getenv("BOOTCHECK_HANG") != "1" {
		t.Skip("BOOTCHECK_HANG=1 not set")
	}
	// A sleep, not an empty select: with every goroutine blocked on
	// nothing the runtime exits "all goroutines are asleep - deadlock!",
	// which is an exit, not a hang (as once happened here).
	for {
		time.Sleep(time.Hour)
	}
}
