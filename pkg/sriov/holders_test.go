package sriov

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

// A process holding a VF's VFIO group open is found by what the file is
// (not its path), the undo waits for it within its bound and then names
// the VF, the group and the holder, and proceeds once it is gone.
func TestWaitVFIOFreeNamesHolders(t *testing.T) {
	root := t.TempDir()
	vf := "0000:41:00.2"
	dev := filepath.Join(root, "bus/pci/devices", vf)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../kernel/iommu_groups/42", filepath.Join(dev, "iommu_group")); err != nil {
		t.Fatal(err)
	}
	vfio := t.TempDir()
	group := filepath.Join(vfio, "42")
	if err := os.WriteFile(group, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The holder opens the group through another path to the same file,
	// as a process in a node container does through the node's /dev/vfio.
	alias := filepath.Join(t.TempDir(), "vfio")
	if err := os.Symlink(vfio, alias); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sh", "-c", `exec 3<"$1"; exec sleep 60`, "sh", filepath.Join(alias, "42"))
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.Kill(holder); err != nil {
			t.Log(err)
		}
	})
	// sh replaces itself with sleep, keeping fd 3: wait until it has.
	deadline := time.Now().Add(5 * time.Second)
	for {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(holder.Process.Pid) + "/comm")
		if strings.TrimSpace(string(comm)) == "sleep" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	d := Restorer{Sysfs: Sysfs{Root: root}, VFIODir: vfio, HolderWait: 500 * time.Millisecond}
	start := time.Now()
	err := d.waitVFIOFree(t.Context(), vf)
	if !errors.Is(err, ErrGroupHeld) {
		t.Fatalf("want ErrGroupHeld, got %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the wait took %s with a 500ms bound", took)
	}
	for _, want := range []string{vf, "group 42", "pid " + strconv.Itoa(holder.Process.Pid) + " (sleep)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}

	// Once the holder exits within the wait, the undo goes ahead.
	d.HolderWait = 10 * time.Second
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := proc.Kill(holder); err != nil {
			t.Error(err)
		}
	}()
	if err := d.waitVFIOFree(t.Context(), vf); err != nil {
		t.Fatalf("after the holder exited: %v", err)
	}
	// A VF without a group, or a group nobody opened, never waits.
	if err := (Restorer{Sysfs: Sysfs{Root: root}, VFIODir: vfio}).waitVFIOFree(t.Context(), "0000:41:00.3"); err != nil {
		t.Fatal(err)
	}
}
