package sysfs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
	"github.com/sriov-lane/sriov-lane/test/vfiouser"
)

type fuseFixture struct {
	sys, vfio string
	srv       *Server
}

// serve mounts a fake sysfs and /dev/vfio for pfs, of the NIC whose VFs
// take vfDriver ("" for the default), until the test ends, and checks
// that nothing stays mounted.
func serve(t *testing.T, vfDriver string, pfs []PF, peerNetns string) *fuseFixture {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	f := &fuseFixture{sys: filepath.Join(dir, "sys"), vfio: filepath.Join(dir, "vfio")}
	srv, err := Serve(ServeConfig{SysfsDir: f.sys, VFIODir: f.vfio, KernelConfig: KernelConfig{
		PFs: pfs, VFDriver: vfDriver, PeerNetns: peerNetns, StateFile: StateFileIn(dir), Log: log.New(testLog{t}, "", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kernel.relayEvery = 100 * time.Millisecond
	f.srv = srv
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
		for _, d := range []string{f.sys, f.vfio} {
			if Mounted(d) {
				t.Errorf("%s still mounted", d)
			}
		}
	})
	return f
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (f *fuseFixture) dev(bdf, attr string) string {
	return filepath.Join(f.sys, "bus/pci/devices", bdf, attr)
}

// store is a product-style write: no O_CREATE, O_TRUNC, one write(2).
func store(path, value string) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = fh.WriteString(value + "\n")
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if want == 0 {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: want %v (%s), got %v", what, want, want.Error(), err)
	}
}

func driverOf(t *testing.T, f *fuseFixture, bdf string) string {
	t.Helper()
	target, err := os.Readlink(f.dev(bdf, "driver"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(target)
}

// forEachNIC runs test as a subtest for every NIC the kernel knows.
func forEachNIC(t *testing.T, test func(t *testing.T, nic NIC)) {
	for _, nic := range NICs {
		t.Run(nic.VFDriver, func(t *testing.T) { test(t, nic) })
	}
}

// The NIC a kernel stands in for is KernelConfig.VFDriver's: its ids, its
// drivers and sriov_totalvfs; an unknown VF driver is refused before
// anything is mounted, and a restarted kernel refuses another NIC's state.
func TestFuseKernelNIC(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		vfDriver string
		want     NIC
	}{{"", X710}, {"iavf", X710}, {"igbvf", I82576}} {
		t.Run("vfDriver="+c.vfDriver, func(t *testing.T) {
			f := serve(t, c.vfDriver, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:04"}}, "")
			pf, vf := PFBDF(0), VFBDF(PFBDF(0), 0)
			if err := store(f.dev(pf, "sriov_numvfs"), "1"); err != nil { // autoprobe on
				t.Fatal(err)
			}
			for _, a := range []struct{ path, want string }{
				{f.dev(pf, "vendor"), c.want.Vendor},
				{f.dev(pf, "device"), c.want.PFDevice},
				{f.dev(pf, "sriov_totalvfs"), fmt.Sprint(c.want.TotalVFs)},
				{f.dev(vf, "vendor"), c.want.Vendor},
				{f.dev(vf, "device"), c.want.VFDevice},
			} {
				if got := read(t, a.path); got != a.want {
					t.Errorf("%s = %q, want %q", strings.TrimPrefix(a.path, f.sys), got, a.want)
				}
			}
			if d := driverOf(t, f, pf); d != c.want.PFDriver {
				t.Errorf("PF driver %q, want %s", d, c.want.PFDriver)
			}
			if d := driverOf(t, f, vf); d != c.want.VFDriver {
				t.Errorf("autoprobed VF driver %q, want %s", d, c.want.VFDriver)
			}
			want := []string{c.want.PFDriver, c.want.VFDriver, DriverVFIO}
			sort.Strings(want)
			if got := names(t, filepath.Join(f.sys, "bus/pci/drivers")); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("bus/pci/drivers %v, want %v", got, want)
			}
		})
	}

	t.Run("unknown VF driver", func(t *testing.T) {
		dir := t.TempDir()
		sys := filepath.Join(dir, "sys")
		srv, err := Serve(ServeConfig{SysfsDir: sys, KernelConfig: KernelConfig{
			PFs: []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:05"}}, VFDriver: "ixgbevf"}})
		if err == nil {
			srv.Close()
			t.Fatal("Serve took VF driver ixgbevf, which no known NIC has")
		}
		for _, w := range []string{`"ixgbevf"`, "iavf", "igbvf"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %s", err, w)
			}
		}
		if Mounted(sys) {
			t.Errorf("%s mounted after Serve failed", sys)
			Unmount(sys)
		}
	})

	t.Run("another NIC's state", func(t *testing.T) {
		f := serve(t, "igbvf", []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:06"}}, "")
		if err := store(f.dev(PFBDF(0), "sriov_numvfs"), "2"); err != nil {
			t.Fatal(err)
		}
		f.srv.Close()
		cfg := f.srv.cfg
		cfg.VFDriver = ""
		srv, err := Serve(cfg)
		if err == nil {
			srv.Close()
			t.Fatal("a default (X710) kernel took the state of an 82576's")
		}
		if !strings.Contains(err.Error(), I82576.PFDevice) || !strings.Contains(err.Error(), X710.Model) {
			t.Errorf("error %q names neither the state's device nor the kernel's NIC", err)
		}
		if Mounted(cfg.SysfsDir) {
			t.Errorf("%s mounted after Serve failed", cfg.SysfsDir)
			Unmount(cfg.SysfsDir)
		}
	})
}

func TestFuseNumVFsErrnos(t *testing.T) { forEachNIC(t, testFuseNumVFsErrnos) }

func testFuseNumVFsErrnos(t *testing.T, nic NIC) {
	f := serve(t, nic.VFDriver, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:01"}}, "")
	pf := PFBDF(0)
	numvfs := f.dev(pf, "sriov_numvfs")
	if got := read(t, f.dev(pf, "sriov_totalvfs")); got != fmt.Sprint(nic.TotalVFs) {
		t.Fatalf("sriov_totalvfs %q, want %d", got, nic.TotalVFs)
	}
	for _, c := range []struct {
		value string
		want  syscall.Errno
	}{
		{fmt.Sprint(nic.TotalVFs + 1), syscall.ERANGE}, // above sriov_totalvfs
		{"70000", syscall.ERANGE},                      // kstrtou16 overflow
		{"abc", syscall.EINVAL},
		{"-1", syscall.EINVAL},
		{"", syscall.EINVAL},
		{"0", 0}, // equal: a no-op
	} {
		wantErrno(t, "sriov_numvfs="+c.value, store(numvfs, c.value), c.want)
	}
	if err := store(f.dev(pf, "sriov_drivers_autoprobe"), "0"); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "autoprobe=maybe", store(f.dev(pf, "sriov_drivers_autoprobe"), "maybe"), syscall.EINVAL)

	// Synchronous: the VFs exist when the write returns.
	if err := store(numvfs, "0x4"); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 4; j++ {
		vf := VFBDF(pf, j)
		got, err := filepath.EvalSymlinks(f.dev(pf, fmt.Sprintf("virtfn%d", j)))
		if err != nil || filepath.Base(got) != vf {
			t.Fatalf("virtfn%d -> %q (%v) right after the write", j, got, err)
		}
		if phys, _ := filepath.EvalSymlinks(f.dev(vf, "physfn")); filepath.Base(phys) != pf {
			t.Errorf("VF %s physfn -> %q", vf, phys)
		}
		if d := driverOf(t, f, vf); d != "" {
			t.Errorf("VF %s bound to %q with autoprobe off", vf, d)
		}
		if g, _ := filepath.EvalSymlinks(filepath.Join(f.dev(vf, "iommu_group"), "devices", vf)); filepath.Base(g) != vf {
			t.Errorf("VF %s not in its IOMMU group: %q", vf, g)
		}
	}
	if _, err := os.Lstat(f.dev(pf, "virtfn4")); err == nil {
		t.Error("virtfn4 exists")
	}
	wantErrno(t, "4 -> 2 VFs", store(numvfs, "2"), syscall.EBUSY)
	wantErrno(t, "4 -> 4 VFs", store(numvfs, "4"), 0)
	if got := read(t, numvfs); got != "4" {
		t.Errorf("sriov_numvfs %q after EBUSY", got)
	}
	// Read-only and write-only attributes refuse the other access, root
	// or not (kernfs_fop_open).
	_, err := os.OpenFile(f.dev(pf, "sriov_totalvfs"), os.O_WRONLY, 0)
	wantErrno(t, "opening sriov_totalvfs for writing", err, syscall.EACCES)
	_, err = os.ReadFile(filepath.Join(f.sys, "bus/pci/drivers", nic.VFDriver, "bind"))
	wantErrno(t, "reading a driver's bind", err, syscall.EACCES)
	_, err = os.OpenFile(filepath.Join(f.sys, "bus/pci/devices", pf, "nosuch"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		t.Error("created a file in sysfs")
	}

	if err := store(numvfs, "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.dev(VFBDF(pf, 0), "")); err == nil {
		t.Error("VF 0 left after numvfs=0")
	}
	// Without a PF driver there is no sriov_configure: ENOENT.
	if err := store(filepath.Join(f.sys, "bus/pci/drivers", nic.PFDriver, "unbind"), pf); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "numvfs without a PF driver", store(numvfs, "2"), syscall.ENOENT)
	if err := store(filepath.Join(f.sys, "bus/pci/drivers", nic.PFDriver, "bind"), pf); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "numvfs with the PF driver back", store(numvfs, "2"), 0)

	// The state outlives the server: a restarted one carries on.
	f.srv.Close()
	srv, err := Serve(f.srv.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if got := read(t, numvfs); got != "2" {
		t.Errorf("sriov_numvfs %q after a restart, want 2", got)
	}
	if got := read(t, f.dev(pf, "sriov_drivers_autoprobe")); got != "0" {
		t.Errorf("autoprobe %q after a restart, want 0", got)
	}
}

func TestFuseBindErrnosAndOverride(t *testing.T) { forEachNIC(t, testFuseBindErrnosAndOverride) }

func testFuseBindErrnosAndOverride(t *testing.T, nic NIC) {
	f := serve(t, nic.VFDriver, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:02"}}, "")
	pf := PFBDF(0)
	if err := store(f.dev(pf, "sriov_numvfs"), "2"); err != nil { // autoprobe on: the VF driver
		t.Fatal(err)
	}
	vf0, vf1 := VFBDF(pf, 0), VFBDF(pf, 1)
	if d := driverOf(t, f, vf0); d != nic.VFDriver {
		t.Fatalf("autoprobed VF driver %q", d)
	}
	drv := func(d, file string) string { return filepath.Join(f.sys, "bus/pci/drivers", d, file) }

	override := f.dev(vf0, "driver_override")
	if got := read(t, override); got != "(null)" {
		t.Errorf("fresh driver_override reads %q, want (null)", got)
	}
	wantErrno(t, "vfio-pci bind without override (no match)", store(drv(DriverVFIO, "bind"), vf0), syscall.ENODEV)
	if err := store(override, DriverVFIO); err != nil {
		t.Fatal(err)
	}
	if got := read(t, override); got != DriverVFIO {
		t.Errorf("driver_override %q", got)
	}
	wantErrno(t, "bind of a bound device", store(drv(DriverVFIO, "bind"), vf0), syscall.EBUSY)
	wantErrno(t, "unbind from a driver it is not bound to", store(drv(DriverVFIO, "unbind"), vf0), syscall.ENODEV)
	wantErrno(t, "bind of no such device", store(drv(DriverVFIO, "bind"), "0000:99:00.0"), syscall.ENODEV)
	wantErrno(t, "probe of no such device", store(filepath.Join(f.sys, "bus/pci/drivers_probe"), "0000:99:00.0"), syscall.ENODEV)
	wantErrno(t, "unbind from "+nic.VFDriver, store(drv(nic.VFDriver, "unbind"), vf0), 0)
	// Each driver's bind takes only the ids in its table: the VF driver
	// refuses the PF, the PF driver the (now unbound) VF.
	wantErrno(t, "PF bind to "+nic.VFDriver, store(drv(nic.VFDriver, "bind"), pf), syscall.ENODEV)
	wantErrno(t, "VF bind to "+nic.PFDriver, store(drv(nic.PFDriver, "bind"), vf0), syscall.ENODEV)
	if d := driverOf(t, f, vf0); d != "" {
		t.Fatalf("driver %q when unbind returned", d)
	}
	if _, err := os.Lstat(drv(nic.VFDriver, vf0)); err == nil {
		t.Errorf("drivers/%s still lists the VF", nic.VFDriver)
	}
	wantErrno(t, "bind to vfio-pci", store(drv(DriverVFIO, "bind"), vf0), 0)
	if d := driverOf(t, f, vf0); d != DriverVFIO {
		t.Fatalf("driver %q when bind returned", d)
	}
	group, _ := iommuGroup(vf0)
	if _, err := os.Stat(filepath.Join(f.vfio, fmt.Sprint(group))); err != nil {
		t.Errorf("VFIO group %d: %v", group, err)
	}
	// A newline alone clears the override.
	if err := store(override, ""); err != nil {
		t.Fatal(err)
	}
	if got := read(t, override); got != "(null)" {
		t.Errorf("cleared driver_override reads %q", got)
	}
	// drivers_probe of a bound device is a success that changes nothing;
	// of an unbound one binds a matching driver.
	wantErrno(t, "probe of a bound device", store(filepath.Join(f.sys, "bus/pci/drivers_probe"), vf0), 0)
	if err := store(drv(nic.VFDriver, "unbind"), vf1); err != nil {
		t.Fatal(err)
	}
	// A probe honours driver_override, then the id tables.
	if err := store(f.dev(vf1, "driver_override"), DriverVFIO); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "probe of an unbound VF with an override", store(filepath.Join(f.sys, "bus/pci/drivers_probe"), vf1), 0)
	if d := driverOf(t, f, vf1); d != DriverVFIO {
		t.Errorf("probed VF driver with override %q, want %s", d, DriverVFIO)
	}
	for _, s := range [][2]string{{drv(DriverVFIO, "unbind"), vf1}, {f.dev(vf1, "driver_override"), ""}} {
		if err := store(s[0], s[1]); err != nil {
			t.Fatal(err)
		}
	}
	wantErrno(t, "probe of an unbound VF", store(filepath.Join(f.sys, "bus/pci/drivers_probe"), vf1), 0)
	if d := driverOf(t, f, vf1); d != nic.VFDriver {
		t.Errorf("probed VF driver %q", d)
	}
	// The product-facing tree: bus/pci/devices links resolve.
	if got, _ := filepath.EvalSymlinks(filepath.Join(f.sys, "bus/pci/devices", vf1)); got != filepath.Join(f.sys, "devices/pci0000:00", vf1) {
		t.Errorf("bus/pci/devices/%s -> %q", vf1, got)
	}
	if _, err := os.Stat(filepath.Join(f.sys, "module/vfio_pci")); err != nil {
		t.Error(err)
	}

	// Removing the VFs releases their drivers; the PF keeps its own.
	if err := store(f.dev(pf, "sriov_numvfs"), "0"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{drv(DriverVFIO, vf0), drv(nic.VFDriver, vf1), filepath.Join(f.sys, "bus/pci/devices", vf0),
		filepath.Join(f.sys, "kernel/iommu_groups", fmt.Sprint(group)), filepath.Join(f.vfio, fmt.Sprint(group))} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after numvfs=0: %v", p, err)
		}
	}
	if d := driverOf(t, f, pf); d != nic.PFDriver {
		t.Errorf("PF driver %q after numvfs=0, want %s", d, nic.PFDriver)
	}
}

// A PF added to a mounted tree shows at once, bound to the PF driver, and
// takes VFs; another PF's VFs stay as they are.
func TestFuseAddPFAfterMount(t *testing.T) {
	f := serve(t, "", nil, "")
	if got := names(t, filepath.Join(f.sys, "bus/pci/devices")); len(got) != 0 {
		t.Fatalf("bus/pci/devices %v before any PF was added", got)
	}
	pf0 := f.srv.Kernel.AddPF(PF{Name: "rga0", MAC: "02:00:00:fe:00:07"})
	if pf0 != PFBDF(0) {
		t.Errorf("first PF added at %s, want %s", pf0, PFBDF(0))
	}
	if d := driverOf(t, f, pf0); d != X710.PFDriver {
		t.Errorf("added PF's driver %q, want %s", d, X710.PFDriver)
	}
	if err := store(f.dev(pf0, "sriov_numvfs"), "2"); err != nil {
		t.Fatal(err)
	}
	pf1 := f.srv.Kernel.AddPF(PF{Name: "rga1", MAC: "02:00:00:fe:00:08"})
	if pf1 != PFBDF(1) {
		t.Errorf("second PF added at %s, want %s", pf1, PFBDF(1))
	}
	if got, want := names(t, filepath.Join(f.sys, "bus/pci/devices")), []string{pf0, VFBDF(pf0, 0), VFBDF(pf0, 1), pf1}; !slices.Equal(got, want) {
		t.Errorf("bus/pci/devices %v, want %v", got, want)
	}
	if got := read(t, f.dev(pf1, "sriov_numvfs")); got != "0" {
		t.Errorf("new PF's sriov_numvfs %q", got)
	}
	if got := read(t, f.dev(pf0, "sriov_numvfs")); got != "2" {
		t.Errorf("first PF's sriov_numvfs %q after another PF came", got)
	}
}

// A VF netdev comes with the VF driver's bind and goes with its unbind or
// the VF's removal, wherever it has been moved.
func TestFuseVFNetdevsGoWithTheirDriver(t *testing.T) {
	testutil.RequireRoot(t)
	// Names from the test's slot: other packages' tests make links and
	// netns on this host at the same time.
	slot := testutil.TakeSlot(t).RigPrefix()
	pfName := slot + "n"
	peers := slot + "-fn"
	nsutil.ForTest(t, peers)
	vfName := func(j int) string { return fmt.Sprintf("%sv%d", pfName, j) }
	t.Cleanup(func() {
		for j := range 3 {
			if l, err := netlink.LinkByName(vfName(j)); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	})
	f := serve(t, "", []PF{{Name: pfName, MAC: "02:00:00:fe:00:09"}}, peers)
	pf := PFBDF(0)
	if err := store(f.dev(pf, "sriov_numvfs"), "3"); err != nil {
		t.Fatal(err)
	}
	for j := range 3 {
		l, err := netlink.LinkByName(vfName(j))
		if err != nil {
			t.Fatalf("VF netdev %s: %v", vfName(j), err)
		}
		if got := read(t, filepath.Join(f.dev(VFBDF(pf, j), "net"), vfName(j), "address")); got != l.Attrs().HardwareAddr.String() {
			t.Errorf("VF %d's net/%s/address %s, link's MAC %s", j, vfName(j), got, l.Attrs().HardwareAddr)
		}
	}
	if err := store(filepath.Join(f.sys, "bus/pci/drivers", X710.VFDriver, "unbind"), VFBDF(pf, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(vfName(2)); err == nil {
		t.Errorf("VF netdev %s still there when the unbind returned", vfName(2))
	}
	if _, err := os.Lstat(f.dev(VFBDF(pf, 2), "net")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("net/ of the unbound VF: %v", err)
	}
	node := nsutil.ForTest(t, slot+"-fnn")
	l0, err := netlink.LinkByName(vfName(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(l0, int(node)); err != nil {
		t.Fatalf("moving VF netdev into the node: %v", err)
	}
	inNode, err := netlink.NewHandleAt(node)
	if err != nil {
		t.Fatal(err)
	}
	defer inNode.Close()
	if _, err := inNode.LinkByName(vfName(0)); err != nil {
		t.Fatalf("moved VF netdev not in the node's netns: %v", err)
	}
	if err := store(f.dev(pf, "sriov_numvfs"), "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := inNode.LinkByName(vfName(0)); err == nil {
		t.Errorf("VF netdev moved into the node still there after numvfs=0")
	}
	if _, err := netlink.LinkByName(vfName(1)); err == nil {
		t.Errorf("VF netdev %s still there after numvfs=0", vfName(1))
	}
}

// What blocks the release of a vfio-pci VF is a held device fd, as on a
// real kernel (field notes section 2; Kernel, "VFIO"): an open group alone
// does not, a device taken through the group does, and so does the device
// fd alone once the group and container are closed.
func TestFuseHeldVFIODeviceBlocksUnbindAndNumVFs(t *testing.T) {
	f := serve(t, "", []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:03"}}, "")
	pf := PFBDF(0)
	for _, s := range [][2]string{{f.dev(pf, "sriov_drivers_autoprobe"), "0"}, {f.dev(pf, "sriov_numvfs"), "2"}} {
		if err := store(s[0], s[1]); err != nil {
			t.Fatal(err)
		}
	}
	bindVFIO := func(vf string) {
		t.Helper()
		if err := store(f.dev(vf, "driver_override"), DriverVFIO); err != nil {
			t.Fatal(err)
		}
		if err := store(filepath.Join(f.sys, "bus/pci/drivers/vfio-pci/bind"), vf); err != nil {
			t.Fatal(err)
		}
	}
	vf0, vf1 := VFBDF(pf, 0), VFBDF(pf, 1)
	bindVFIO(vf0)
	bindVFIO(vf1)
	g0, _ := iommuGroup(vf0)
	group := fmt.Sprint(g0)
	groupFile := filepath.Join(f.vfio, group)
	unbind := func() error { return store(filepath.Join(f.sys, "bus/pci/drivers/vfio-pci/unbind"), vf0) }

	// The group open alone: a second open is refused, an unbind is not.
	opened, err := os.Open(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	if _, err := os.Open(groupFile); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("second open of group %d: want EBUSY, got %v", g0, err)
	}
	// A device fd needs a container first (vfio_device_assign_container).
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, opened.Fd(), vfiouser.GroupGetDeviceFD, 0); !errors.Is(errno, syscall.EINVAL) {
		t.Errorf("VFIO_GROUP_GET_DEVICE_FD without a container: want EINVAL, got %v", errno)
	}
	if err := unbind(); err != nil {
		t.Fatalf("unbind with only the group open: %v", err)
	}
	if _, err := os.Stat(groupFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("group file after unbind with the group open: %v", err)
	}
	// Bound again, the device is in a new group, which opens although a
	// file of the old one still is; the old one's close leaves it open.
	bindVFIO(vf0)
	reopened, err := os.Open(groupFile)
	if err != nil {
		t.Fatalf("opening group %d anew while a file of the old one is open: %v", g0, err)
	}
	opened.Close()
	if !f.srv.Kernel.GroupOpen(g0) {
		t.Errorf("group %d not open after the old group's file was closed", g0)
	}
	reopened.Close()
	if err := unbind(); err != nil {
		t.Fatal(err)
	}

	expectBlocked := func(what string, write func() error, release func()) {
		t.Helper()
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- write() }()
		select {
		case err := <-done:
			t.Fatalf("%s returned while the device is held: %v", what, err)
		case <-time.After(bound.Scaled(300 * time.Millisecond)):
		}
		if d := driverOf(t, f, vf0); d != DriverVFIO {
			t.Errorf("%s: driver %q while blocked", what, d)
		}
		release()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s after release: %v", what, err)
			}
			t.Logf("%s blocked %v, until the device was let go", what, time.Since(start))
		case <-time.After(bound.Scaled(5 * time.Second)):
			t.Fatalf("%s still blocked 5s after the device was let go", what)
		}
	}
	hold := func() *vfiouser.DeviceHold {
		t.Helper()
		bindVFIO(vf0)
		h, err := vfiouser.HoldDevice(f.vfio, group, vf0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		if !f.srv.Kernel.DeviceHeld(g0) {
			t.Fatalf("group %d: no device held after HoldDevice", g0)
		}
		return h
	}

	h := hold()
	expectBlocked("unbind from vfio-pci", unbind, func() { h.Close() })
	if d := driverOf(t, f, vf0); d != "" {
		t.Errorf("driver %q after the unbind returned", d)
	}
	if _, err := os.Stat(groupFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("group file after unbind: %v", err)
	}

	// The device fd alone, group and container closed, still holds it.
	h = hold()
	if err := h.CloseGroup(); err != nil {
		t.Fatal(err)
	}
	// What pkg/sriov's holder search finds of it: an fd of this process
	// that is the group file (same device and inode), as the fake's device
	// fd is; a real kernel's is anon_inode:[vfio-device].
	if !fdOpenOn(t, groupFile) {
		t.Errorf("no fd of this process is the group file %s while the device is held", groupFile)
	}
	// A read of sriov_numvfs waits for the store too (device lock).
	readDone := make(chan string, 1)
	expectBlocked("sriov_numvfs=0", func() error {
		return store(f.dev(pf, "sriov_numvfs"), "0")
	}, func() {
		go func() {
			b, _ := os.ReadFile(f.dev(pf, "sriov_numvfs"))
			readDone <- string(b)
		}()
		select {
		case v := <-readDone:
			t.Errorf("sriov_numvfs read %q while a store held the device", v)
		case <-time.After(bound.Scaled(200 * time.Millisecond)):
		}
		h.Close()
	})
	select {
	case v := <-readDone:
		if v != "0\n" {
			t.Errorf("sriov_numvfs read after the store: %q", v)
		}
	case <-time.After(bound.Scaled(5 * time.Second)):
		t.Error("sriov_numvfs read still blocked after the store")
	}
	if groups, _ := os.ReadDir(f.vfio); len(groups) != 1 || groups[0].Name() != "vfio" {
		t.Errorf("fake /dev/vfio after the VFs went: %v", groups)
	}

	// Closing the server fails a store still blocked, rather than hang.
	if err := store(f.dev(pf, "sriov_numvfs"), "1"); err != nil {
		t.Fatal(err)
	}
	hold()
	done := make(chan error, 1)
	go func() { done <- store(f.dev(pf, "sriov_numvfs"), "0") }()
	time.Sleep(200 * time.Millisecond)
	f.srv.Kernel.Close()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ENODEV) {
			t.Errorf("blocked store at shutdown: want ENODEV, got %v", err)
		}
	case <-time.After(bound.Scaled(5 * time.Second)):
		t.Fatal("blocked store not released by Close")
	}
}

// fdOpenOn reports whether one of this process's fds is the file at path.
func fdOpenOn(t *testing.T, path string) bool {
	t.Helper()
	var want syscall.Stat_t
	if err := syscall.Stat(path, &want); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Stat("/proc/self/fd/"+fd.Name(), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			return true
		}
	}
	return false
}

// inNetns runs fn on a thread in the named netns: FUSE sees the thread's
// id as the caller, and the fake sysfs shows that thread's netns.
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := nsutil.Do(ns, func() error { fn(); return nil }); err != nil {
		t.Error(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// Run for every NIC: a VF netdev is its VF driver's, whichever that is.
func TestFuseNetViewIsTheCallersNetns(t *testing.T) {
	testutil.RequireRoot(t)
	forEachNIC(t, testFuseNetViewIsTheCallersNetns)
}

func testFuseNetViewIsTheCallersNetns(t *testing.T, nic NIC) {
	slot := testutil.TakeSlot(t).RigPrefix() // as in TestFuseVFNetdevsGoWithTheirDriver
	pfName := slot + "v"
	peers := slot + "-fv"
	node := slot + "-fvn"
	peerNs := nsutil.ForTest(t, peers)
	nodeNs := nsutil.ForTest(t, node)
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(pfName); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pfName}, PeerName: pfName,
		PeerNamespace: netlink.NsFd(int(peerNs))}); err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(pfName)
	if err != nil {
		t.Fatal(err)
	}
	mac := l.Attrs().HardwareAddr.String()
	f := serve(t, nic.VFDriver, []PF{{Name: pfName, MAC: mac}}, peers)
	pf := PFBDF(0)

	// The host sees the PF in class/net and under its device.
	if got := names(t, filepath.Join(f.sys, "class/net")); !slices.Contains(got, pfName) || !slices.Contains(got, "lo") {
		t.Fatalf("host class/net %v lacks %s or lo", got, pfName)
	}
	if got := read(t, filepath.Join(f.sys, "class/net", pfName, "address")); got != mac {
		t.Errorf("class/net/%s/address %q, want %s", pfName, got, mac)
	}
	if got, _ := filepath.EvalSymlinks(filepath.Join(f.sys, "class/net", pfName, "device")); filepath.Base(got) != pf {
		t.Errorf("class/net/%s/device -> %q", pfName, got)
	}
	if got := names(t, f.dev(pf, "net")); len(got) != 1 || got[0] != pfName {
		t.Errorf("host net/ of the PF: %v", got)
	}
	// A VF netdev appears in the host netns (the initial netns), under
	// its VF.
	if err := store(f.dev(pf, "sriov_numvfs"), "1"); err != nil {
		t.Fatal(err)
	}
	vfName := pfName + "v0"
	t.Cleanup(func() { _ = store(f.dev(pf, "sriov_numvfs"), "0") })
	if got := names(t, f.dev(VFBDF(pf, 0), "net")); len(got) != 1 || got[0] != vfName {
		t.Errorf("net/ of the VF: %v, want [%s]", got, vfName)
	}

	// Moved into a node's netns and renamed, the PF leaves the host's view
	// and shows, under its new name, to a caller in that netns.
	if err := netlink.LinkSetNsFd(l, int(nodeNs)); err != nil {
		t.Fatal(err)
	}
	inNode, err := netlink.NewHandleAt(nodeNs)
	if err != nil {
		t.Fatal(err)
	}
	defer inNode.Close()
	moved, err := inNode.LinkByName(pfName)
	if err != nil {
		t.Fatal(err)
	}
	if err := inNode.LinkSetName(moved, "eth7"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(f.sys, "class/net")); slices.Contains(got, pfName) || slices.Contains(got, "eth7") {
		t.Errorf("host class/net %v still shows the moved PF", got)
	}
	if got := names(t, f.dev(pf, "net")); len(got) != 0 {
		t.Errorf("host net/ of the moved PF: %v", got)
	}
	inNetns(t, node, func() {
		got := names(t, filepath.Join(f.sys, "class/net"))
		if len(got) != 2 || got[0] != "eth7" || got[1] != "lo" {
			t.Errorf("node's class/net %v, want [eth7 lo]", got)
		}
		if got := names(t, f.dev(pf, "net")); len(got) != 1 || got[0] != "eth7" {
			t.Errorf("node's net/ of the PF %v, want [eth7]", got)
		}
		if got := read(t, filepath.Join(f.sys, "class/net/eth7/address")); got != mac {
			t.Errorf("node's class/net/eth7/address %q", got)
		}
		if got := names(t, f.dev(VFBDF(pf, 0), "net")); len(got) != 0 {
			t.Errorf("node sees the host's VF netdev: %v", got)
		}
		if got := names(t, filepath.Join(f.sys, "devices/virtual/net")); len(got) != 1 || got[0] != "lo" {
			t.Errorf("node's devices/virtual/net %v", got)
		}
	})
	// So does another process in that netns.
	if nsenter, err := exec.LookPath("nsenter"); err == nil {
		out, err := exec.Command(nsenter, "--net=/var/run/netns/"+node, "ls", filepath.Join(f.sys, "class/net")).CombinedOutput()
		if err != nil || strings.Join(strings.Fields(string(out)), " ") != "eth7 lo" {
			t.Errorf("ls class/net in the node's netns: %q (%v), want eth7 lo", out, err)
		}
	}
}
