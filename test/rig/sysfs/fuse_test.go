package sysfs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

type fuseFixture struct {
	sys, vfio string
	srv       *Server
}

// serve mounts a fake sysfs and /dev/vfio for pfs until the test ends,
// and checks that nothing stays mounted.
func serve(t *testing.T, pfs []PF, peerNetns string) *fuseFixture {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	f := &fuseFixture{sys: filepath.Join(dir, "sys"), vfio: filepath.Join(dir, "vfio")}
	srv, err := Serve(ServeConfig{SysfsDir: f.sys, VFIODir: f.vfio, KernelConfig: KernelConfig{
		PFs: pfs, PeerNetns: peerNetns, StateFile: StateFileIn(dir), Log: log.New(testLog{t}, "", 0)}})
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

func TestFuseNumVFsErrnos(t *testing.T) {
	f := serve(t, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:01"}}, "")
	pf := PFBDF(0)
	numvfs := f.dev(pf, "sriov_numvfs")
	if got := read(t, f.dev(pf, "sriov_totalvfs")); got != "8" {
		t.Fatalf("sriov_totalvfs %q", got)
	}
	for _, c := range []struct {
		value string
		want  syscall.Errno
	}{
		{"9", syscall.ERANGE},     // above sriov_totalvfs
		{"70000", syscall.ERANGE}, // kstrtou16 overflow
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
	_, err = os.ReadFile(filepath.Join(f.sys, "bus/pci/drivers/iavf/bind"))
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
	if err := store(filepath.Join(f.sys, "bus/pci/drivers/i40e/unbind"), pf); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "numvfs without a PF driver", store(numvfs, "2"), syscall.ENOENT)
	if err := store(filepath.Join(f.sys, "bus/pci/drivers/i40e/bind"), pf); err != nil {
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

func TestFuseBindErrnosAndOverride(t *testing.T) {
	f := serve(t, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:02"}}, "")
	pf := PFBDF(0)
	if err := store(f.dev(pf, "sriov_numvfs"), "2"); err != nil { // autoprobe on: iavf
		t.Fatal(err)
	}
	vf0, vf1 := VFBDF(pf, 0), VFBDF(pf, 1)
	if d := driverOf(t, f, vf0); d != DriverVF {
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
	wantErrno(t, "unbind from iavf", store(drv(DriverVF, "unbind"), vf0), 0)
	if d := driverOf(t, f, vf0); d != "" {
		t.Fatalf("driver %q when unbind returned", d)
	}
	if _, err := os.Lstat(drv(DriverVF, vf0)); err == nil {
		t.Error("drivers/iavf still lists the VF")
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
	if err := store(drv(DriverVF, "unbind"), vf1); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "probe of an unbound VF", store(filepath.Join(f.sys, "bus/pci/drivers_probe"), vf1), 0)
	if d := driverOf(t, f, vf1); d != DriverVF {
		t.Errorf("probed VF driver %q", d)
	}
	// The product-facing tree: bus/pci/devices links resolve.
	if got, _ := filepath.EvalSymlinks(filepath.Join(f.sys, "bus/pci/devices", vf1)); got != filepath.Join(f.sys, "devices/pci0000:00", vf1) {
		t.Errorf("bus/pci/devices/%s -> %q", vf1, got)
	}
	if _, err := os.Stat(filepath.Join(f.sys, "module/vfio_pci")); err != nil {
		t.Error(err)
	}
}

func TestFuseOpenVFIOGroupBlocksUnbindAndNumVFs(t *testing.T) {
	f := serve(t, []PF{{Name: "rgf0", MAC: "02:00:00:fe:00:03"}}, "")
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
	groupFile := filepath.Join(f.vfio, fmt.Sprint(g0))

	// A VM (QEMU) holds the group; a second open is refused.
	holder, err := os.Open(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := os.Open(groupFile); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("second open of group %d: want EBUSY, got %v", g0, err)
	}

	expectBlocked := func(what string, write func() error, release func()) {
		t.Helper()
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- write() }()
		select {
		case err := <-done:
			t.Fatalf("%s returned while the group is open: %v", what, err)
		case <-time.After(300 * time.Millisecond):
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
			t.Logf("%s blocked %v, until the group was closed", what, time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still blocked 5s after the group was closed", what)
		}
	}
	expectBlocked("unbind from vfio-pci", func() error {
		return store(filepath.Join(f.sys, "bus/pci/drivers/vfio-pci/unbind"), vf0)
	}, func() { holder.Close() })
	if d := driverOf(t, f, vf0); d != "" {
		t.Errorf("driver %q after the unbind returned", d)
	}
	if _, err := os.Stat(groupFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("group file after unbind: %v", err)
	}

	// Removing the VFs blocks the same way, on any VF held.
	bindVFIO(vf0)
	holder, err = os.Open(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// A read of sriov_numvfs waits for the store too (device lock).
	readDone := make(chan string, 1)
	expectBlocked("sriov_numvfs=0", func() error {
		err := store(f.dev(pf, "sriov_numvfs"), "0")
		return err
	}, func() {
		go func() {
			b, _ := os.ReadFile(f.dev(pf, "sriov_numvfs"))
			readDone <- string(b)
		}()
		select {
		case v := <-readDone:
			t.Errorf("sriov_numvfs read %q while a store held the device", v)
		case <-time.After(200 * time.Millisecond):
		}
		holder.Close()
	})
	select {
	case v := <-readDone:
		if v != "0\n" {
			t.Errorf("sriov_numvfs read after the store: %q", v)
		}
	case <-time.After(5 * time.Second):
		t.Error("sriov_numvfs read still blocked after the store")
	}
	if got := read(t, f.dev(pf, "sriov_numvfs")); got != "0" {
		t.Errorf("sriov_numvfs %q", got)
	}
	if groups, _ := os.ReadDir(f.vfio); len(groups) != 1 || groups[0].Name() != "vfio" {
		t.Errorf("fake /dev/vfio after the VFs went: %v", groups)
	}

	// Closing the server fails a store still blocked, rather than hang.
	if err := store(f.dev(pf, "sriov_numvfs"), "1"); err != nil {
		t.Fatal(err)
	}
	bindVFIO(vf0)
	holder, err = os.Open(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	done := make(chan error, 1)
	go func() { done <- store(f.dev(pf, "sriov_numvfs"), "0") }()
	time.Sleep(200 * time.Millisecond)
	f.srv.Kernel.Close()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ENODEV) {
			t.Errorf("blocked store at shutdown: want ENODEV, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked store not released by Close")
	}
}

// listIn runs fn on a thread in the named netns: FUSE sees the thread's
// id as the caller, and the fake sysfs shows that thread's netns.
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestFuseNetViewIsTheCallersNetns(t *testing.T) {
	testutil.RequireRoot(t)
	pfName := fmt.Sprintf("rgv%d", os.Getpid()%10000)
	peers := fmt.Sprintf("rg-fv-%d", os.Getpid())
	node := fmt.Sprintf("rg-fvn-%d", os.Getpid())
	for _, n := range []string{peers, node} {
		n := n
		t.Cleanup(func() {
			if err := nsutil.Delete(n); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		if err := nsutil.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	peerNs, err := netns.GetFromName(peers)
	if err != nil {
		t.Fatal(err)
	}
	defer peerNs.Close()
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
	f := serve(t, []PF{{Name: pfName, MAC: mac}}, peers)
	pf := PFBDF(0)

	// The host sees the PF in class/net and under its device.
	if got := names(t, filepath.Join(f.sys, "class/net")); !contains(got, pfName) || !contains(got, "lo") {
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
	nodeNs, err := netns.GetFromName(node)
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNs.Close()
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
	if got := names(t, filepath.Join(f.sys, "class/net")); contains(got, pfName) || contains(got, "eth7") {
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
