package rigsysfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func mkPCI(t *testing.T, root string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "bus", "pci", "devices"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The rig's fake sysfs reaches the stand-ins through bind mounts made by
// other processes in other mount namespaces (Docker's into the agent, the
// container runtime's into the pod). That works only if the FUSE mount lets
// other processes in (allow_other, sysfs.Serve): check it with a process
// that bind-mounts the tree in a mount namespace of its own and reads it,
// and with a process of another uid reading the mount directly.
func TestFakeSysfsIsReadableThroughABindMountInAnotherProcess(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("needs /dev/fuse: %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("needs unshare(1) (util-linux): %v", err)
	}
	dir := t.TempDir()
	sysfs.ServeForTest(t, sysfs.ServeConfig{SysfsDir: filepath.Join(dir, "sys"),
		KernelConfig: sysfs.KernelConfig{PFs: []sysfs.PF{{Name: "rsfs0", MAC: "02:00:00:5f:00:01"}}}})
	src, dst := filepath.Join(dir, "sys"), filepath.Join(dir, "node", "var", "log", "sriov-lane-rig", "sys")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	pf := sysfs.PFBDF(0)
	script := `mount --bind "$1" "$2" && ls "$2/bus/pci/devices" && cat "$2/bus/pci/devices/$3/sriov_totalvfs"`
	out, err := exec.Command(unshare, "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", src, dst, pf).CombinedOutput()
	if err != nil {
		t.Fatalf("reading the fake sysfs through a bind mount in another mount namespace: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != pf || got[1] != strconv.Itoa(sysfs.X710.TotalVFs) {
		t.Errorf("through the bind mount: %q, want %s and its sriov_totalvfs %d", out, pf, sysfs.X710.TotalVFs)
	}

	// A bind mount here too: FindIn takes it as the stand-ins do.
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dst, syscall.MNT_DETACH) })
	if got, err := FindIn([]string{filepath.Join(dir, "missing"), dst, "/sys"}); err != nil || got != dst {
		t.Errorf("FindIn = %q, %v; want the bind mount %s", got, err, dst)
	}

	// Another uid: refused unless the mount allows other users (the temp
	// dirs on the way are 0700).
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cat := exec.Command("cat", filepath.Join(dst, "bus/pci/devices", pf, "vendor"))
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cat.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != sysfs.VendorIntel {
		t.Errorf("uid 65534 reading vendor: %q (%v), want %s (allow_other)", out, err, sysfs.VendorIntel)
	}
}
