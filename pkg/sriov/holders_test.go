package sriov

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/test/bound"
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
	// sh replaces itself with sleep, keeping fd 3: wait until it has (or
	// 5 s, then go on: the checks below fail if it has not).
	var comm string // the holder's comm at the last look
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, bound.Scaled(5*time.Second), true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(holder.Process.Pid) + "/comm")
		comm = strings.TrimSpace(string(b))
		return comm == "sleep", nil
	}); err != nil {
		t.Logf("the holder is not sleep after 5 s (comm %q); going on", comm)
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

// fakeProc builds a /proc with one process per entry: its comm and, for
// each fd, where the fd link points and its fdinfo.
type fakeFD struct{ link, fdinfo string }

func fakeProc(t *testing.T, procs map[int]struct {
	comm string
	fds  []fakeFD
}) string {
	t.Helper()
	root := t.TempDir()
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		for _, d := range []string{"fd", "fdinfo"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(p.comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i, fd := range p.fds {
			n := strconv.Itoa(i + 3)
			if err := os.Symlink(fd.link, filepath.Join(dir, "fd", n)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "fdinfo", n), []byte("pos:\t0\nflags:\t02000002\n"+fd.fdinfo), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// vfWithGroup makes a sysfs with vf in IOMMU group 42 and a /dev/vfio with
// the group file.
func vfWithGroup(t *testing.T, vf string) (sysRoot, vfioDir string) {
	t.Helper()
	sysRoot = t.TempDir()
	dev := filepath.Join(sysRoot, "bus/pci/devices", vf)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../kernel/iommu_groups/42", filepath.Join(dev, "iommu_group")); err != nil {
		t.Fatal(err)
	}
	vfioDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(vfioDir, "42"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return sysRoot, vfioDir
}

// A holder whose only trace is a VFIO device fd: where the kernel names
// the device in fdinfo (v6.18+) it is matched to the VF, and one naming
// another device is no holder; where the kernel names none (6.1, 6.12) it
// does not hold the wait back (it may be another VF's), but a write the
// kernel then blocks names it as an unnamed device fd's holder.
func TestDeviceFDHolders(t *testing.T) {
	vf := "0000:01:10.0"
	sysRoot, vfioDir := vfWithGroup(t, vf)
	proc := fakeProc(t, map[int]struct {
		comm string
		fds  []fakeFD
	}{
		4001: {"qemu-named", []fakeFD{{"/dev/null", ""}, {vfioDeviceFD, "vfio-device-syspath: /sys/devices/pci0000:00/0000:00:01.0/0000:01:10.0\n"}}},
		4002: {"qemu-other", []fakeFD{{vfioDeviceFD, "vfio-device-syspath: /sys/devices/pci0000:00/0000:00:01.0/0000:01:10.2\n"}}},
		4003: {"vfiohold", []fakeFD{{vfioDeviceFD, ""}}},
		4004: {"sleep", []fakeFD{{"anon_inode:[eventfd]", ""}}},
	})
	d := Restorer{Sysfs: Sysfs{Root: sysRoot}, VFIODir: vfioDir, ProcRoot: proc, HolderWait: 300 * time.Millisecond}
	tg, ok, err := d.target(vf)
	if err != nil || !ok {
		t.Fatalf("target: %v %v", ok, err)
	}
	hs, err := scanHolders(t.Context(), proc, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]Holder{}
	for _, h := range hs {
		got[h.PID] = h
	}
	if h, ok := got[4001]; !ok || h.Unsure || h.Command != "qemu-named" || !strings.Contains(h.String(), "VFIO device fd of "+vf) {
		t.Errorf("the fd fdinfo names as %s: got %+v", vf, h)
	}
	if h, ok := got[4002]; ok {
		t.Errorf("an fd of another device counted as a holder: %+v", h)
	}
	if h, ok := got[4003]; !ok || !h.Unsure || !strings.Contains(h.String(), "pid 4003 (vfiohold) holding "+UnknownDeviceFD) {
		t.Errorf("the unnamed device fd: got %+v (%s)", h, h)
	}
	if _, ok := got[4004]; ok {
		t.Error("an eventfd counted as a holder")
	}

	// The wait is held back by the named holder only, and its error names it.
	err = d.waitVFIOFree(t.Context(), vf)
	if !errors.Is(err, ErrGroupHeld) || !strings.Contains(err.Error(), "pid 4001 (qemu-named)") || strings.Contains(err.Error(), "4003") {
		t.Fatalf("wait with a named and an unnamed device fd: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(proc, "4001")); err != nil {
		t.Fatal(err)
	}
	if err := d.waitVFIOFree(t.Context(), vf); err != nil {
		t.Fatalf("an unnamed device fd held the wait back: %v", err)
	}

	// A write the kernel blocks is bounded and names the unnamed fd's holder.
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	err = d.boundedVFIOWrite(t.Context(), []string{vf}, func() error { <-release; return nil })
	if !errors.Is(err, ErrGroupHeld) || !strings.Contains(err.Error(), "pid 4003 (vfiohold) holding "+UnknownDeviceFD) {
		t.Fatalf("blocked write: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the blocked write took %s with a 300ms bound", took)
	}
}

// On kernels with VFIO device cdevs a holder may open only
// /dev/vfio/devices/vfioN: it is matched by the cdev's device number,
// read from sysfs.
func TestCdevHolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	vf := "0000:01:10.0"
	sysRoot, vfioDir := vfWithGroup(t, vf)
	cdevDir := filepath.Join(sysRoot, "bus/pci/devices", vf, "vfio-dev", "vfio3")
	if err := os.MkdirAll(cdevDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cdevDir, "dev"), []byte("238:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(t.TempDir(), "vfio3")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(238, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	proc := fakeProc(t, map[int]struct {
		comm string
		fds  []fakeFD
	}{5001: {"qemu", []fakeFD{{node, ""}}}})
	d := Restorer{Sysfs: Sysfs{Root: sysRoot}, VFIODir: vfioDir, ProcRoot: proc, HolderWait: 300 * time.Millisecond}
	err := d.waitVFIOFree(t.Context(), vf)
	if !errors.Is(err, ErrGroupHeld) || !strings.Contains(err.Error(), "pid 5001 (qemu) holding the VFIO device cdev vfio3") {
		t.Fatalf("cdev holder: %v", err)
	}
}
