package sysfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

type emuFixture struct {
	root  string
	vfio  string
	pfs   []PF
	tree  Tree
	netns string
}

// startEmulator builds a tree for two PFs and runs an emulator on it until
// the test ends. peerNetns "" disables VF netdevs.
func startEmulator(t *testing.T, pfPrefix, peerNetns string) *emuFixture {
	t.Helper()
	testutil.RequireRoot(t)
	f := &emuFixture{root: t.TempDir(), vfio: t.TempDir(), netns: peerNetns,
		pfs: []PF{{Name: pfPrefix + "0", MAC: "02:00:00:aa:00:01"}, {Name: pfPrefix + "1", MAC: "02:00:00:aa:00:02"}}}
	f.tree = Tree{Root: f.root}
	if err := Build(f.root, f.pfs); err != nil {
		t.Fatal(err)
	}
	if peerNetns != "" {
		t.Cleanup(func() {
			if err := nsutil.Delete(peerNetns); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		if err := nsutil.Create(peerNetns); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("emulator: %v", err)
		}
	})
	em := NewEmulator(EmulatorConfig{Root: f.root, VFIODir: f.vfio, PeerNetns: peerNetns})
	go func() { done <- em.Run(ctx) }()
	return f
}

// write behaves like product code: no O_CREATE, trailing newline.
func (f *emuFixture) write(t *testing.T, rel, value string) {
	t.Helper()
	if err := writeAttr(filepath.Join(f.root, rel), value, false); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond and returns how long it took, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not reached within %v", what, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func pfDir(i int) string { return "devices/pci0000:00/" + PFBDF(i) }

func (f *emuFixture) virtfnCount(i int) int {
	n := 0
	for j := 0; j < TotalVFs+2; j++ {
		if _, err := os.Lstat(filepath.Join(f.root, pfDir(i), fmt.Sprintf("virtfn%d", j))); err == nil {
			n++
		}
	}
	return n
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestEmulatorCreatesAndRemovesVFs(t *testing.T) {
	f := startEmulator(t, "rgs", "")
	f.write(t, pfDir(0)+"/sriov_drivers_autoprobe", "0")
	f.write(t, pfDir(0)+"/sriov_numvfs", "4")
	// Bounds are generous: make test runs this beside the e2e lanes, and a
	// loaded host can hold the emulator off the CPU for a while; the time
	// it took is logged.
	took := waitFor(t, 2*time.Second, "4 virtfn links", func() bool { return f.virtfnCount(0) == 4 })
	t.Logf("4 VFs appeared after %v", took)

	for j := 0; j < 4; j++ {
		vf := VFBDF(PFBDF(0), j)
		dir := f.tree.DeviceDir(vf)
		if got, _ := filepath.EvalSymlinks(filepath.Join(f.root, pfDir(0), fmt.Sprintf("virtfn%d", j))); got != dir {
			t.Errorf("virtfn%d -> %s, want %s", j, got, dir)
		}
		if got, _ := filepath.EvalSymlinks(filepath.Join(dir, "physfn")); got != f.tree.DeviceDir(PFBDF(0)) {
			t.Errorf("VF %s physfn -> %s", vf, got)
		}
		if v, _ := ReadAttr(filepath.Join(dir, "device")); v != DeviceVF {
			t.Errorf("VF %s device = %q", vf, v)
		}
		if _, err := os.Stat(filepath.Join(dir, "driver_override")); err != nil {
			t.Errorf("VF %s driver_override: %v", vf, err)
		}
		if got, _ := filepath.EvalSymlinks(filepath.Join(f.root, "bus/pci/devices", vf)); got != dir {
			t.Errorf("bus/pci/devices/%s -> %s", vf, got)
		}
		if got, _ := filepath.EvalSymlinks(filepath.Join(dir, "iommu_group", "devices", vf)); got != dir {
			t.Errorf("VF %s iommu group does not list it: %s", vf, got)
		}
		if d := f.tree.Driver(vf); d != "" {
			t.Errorf("VF %s bound to %q with autoprobe off", vf, d)
		}
	}
	if n := f.virtfnCount(1); n != 0 {
		t.Errorf("other PF got %d VFs", n)
	}

	// A different non-zero count while VFs exist is EBUSY: file restored.
	f.write(t, pfDir(0)+"/sriov_numvfs", "2")
	waitFor(t, time.Second, "numvfs restored to 4", func() bool {
		v, _ := ReadAttr(filepath.Join(f.root, pfDir(0), "sriov_numvfs"))
		return v == "4"
	})
	if n := f.virtfnCount(0); n != 4 {
		t.Errorf("EBUSY write changed VF count to %d", n)
	}
	// Above totalvfs is ERANGE.
	f.write(t, pfDir(1)+"/sriov_numvfs", "9")
	waitFor(t, time.Second, "numvfs 9 rejected", func() bool {
		v, _ := ReadAttr(filepath.Join(f.root, pfDir(1), "sriov_numvfs"))
		return v == "0"
	})

	f.write(t, pfDir(0)+"/sriov_numvfs", "0")
	took = waitFor(t, 2*time.Second, "VFs removed", func() bool { return f.virtfnCount(0) == 0 })
	t.Logf("VFs removed after %v", took)
	for j := 0; j < 4; j++ {
		vf := VFBDF(PFBDF(0), j)
		for _, p := range []string{f.tree.DeviceDir(vf), filepath.Join(f.root, "bus/pci/devices", vf)} {
			if exists(p) {
				t.Errorf("%s left after numvfs=0", p)
			}
		}
	}
	// And VFs can be created again after removal.
	f.write(t, pfDir(0)+"/sriov_numvfs", "2")
	waitFor(t, time.Second, "2 virtfn links", func() bool { return f.virtfnCount(0) == 2 })
}

func TestEmulatorBinding(t *testing.T) {
	f := startEmulator(t, "rgs", "")
	f.write(t, pfDir(0)+"/sriov_numvfs", "2") // autoprobe on: iavf
	waitFor(t, time.Second, "2 VFs", func() bool { return f.virtfnCount(0) == 2 })
	vf0, vf1 := VFBDF(PFBDF(0), 0), VFBDF(PFBDF(0), 1)
	for _, vf := range []string{vf0, vf1} {
		if d := f.tree.Driver(vf); d != DriverVF {
			t.Fatalf("autoprobed VF %s driver = %q, want iavf", vf, d)
		}
		if !exists(filepath.Join(f.tree.DriverDir(DriverVF), vf)) {
			t.Errorf("drivers/iavf/%s missing", vf)
		}
	}
	drvFile := func(d, f string) string { return "bus/pci/drivers/" + d + "/" + f }
	driverIs := func(vf, want string) func() bool {
		return func() bool { return f.tree.Driver(vf) == want }
	}

	// Binding an already bound device is refused.
	f.write(t, drvFile(DriverVFIO, "bind"), vf0)
	waitFor(t, time.Second, "bind file truncated", func() bool {
		b, _ := os.ReadFile(filepath.Join(f.root, drvFile(DriverVFIO, "bind")))
		return len(b) == 0
	})
	if d := f.tree.Driver(vf0); d != DriverVF {
		t.Errorf("bind over a bound device moved driver to %q", d)
	}

	f.write(t, drvFile(DriverVF, "unbind"), vf0)
	took := waitFor(t, time.Second, "unbind", driverIs(vf0, ""))
	t.Logf("unbind took %v", took)
	if exists(filepath.Join(f.tree.DriverDir(DriverVF), vf0)) {
		t.Errorf("drivers/iavf/%s left after unbind", vf0)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, drvFile(DriverVF, "unbind"))); len(b) != 0 {
		t.Errorf("unbind file not truncated: %q", b)
	}

	// vfio-pci has no id table: without override the bind is ignored.
	f.write(t, drvFile(DriverVFIO, "bind"), vf0)
	waitFor(t, time.Second, "bind file truncated", func() bool {
		b, _ := os.ReadFile(filepath.Join(f.root, drvFile(DriverVFIO, "bind")))
		return len(b) == 0
	})
	time.Sleep(50 * time.Millisecond)
	if d := f.tree.Driver(vf0); d != "" {
		t.Fatalf("vfio-pci bound %s without driver_override (driver %q)", vf0, d)
	}

	f.write(t, "devices/pci0000:00/"+vf0+"/driver_override", DriverVFIO)
	f.write(t, drvFile(DriverVFIO, "bind"), vf0)
	took = waitFor(t, time.Second, "vfio-pci bind", driverIs(vf0, DriverVFIO))
	t.Logf("vfio-pci bind took %v", took)
	group, _ := iommuGroup(vf0)
	if !exists(filepath.Join(f.vfio, fmt.Sprint(group))) {
		t.Errorf("vfio group node %d not created", group)
	}
	if v, _ := ReadAttr(filepath.Join(f.tree.DeviceDir(vf0), "driver_override")); v != DriverVFIO {
		t.Errorf("driver_override not kept: %q", v)
	}

	// drivers_probe honours driver_override, else a VF goes to iavf.
	f.write(t, drvFile(DriverVF, "unbind"), vf1)
	waitFor(t, time.Second, "unbind vf1", driverIs(vf1, ""))
	f.write(t, "devices/pci0000:00/"+vf1+"/driver_override", DriverVFIO)
	f.write(t, "bus/pci/drivers_probe", vf1)
	waitFor(t, time.Second, "probe to vfio-pci", driverIs(vf1, DriverVFIO))
	f.write(t, drvFile(DriverVFIO, "unbind"), vf1)
	waitFor(t, time.Second, "unbind vfio", driverIs(vf1, ""))
	group1, _ := iommuGroup(vf1)
	if exists(filepath.Join(f.vfio, fmt.Sprint(group1))) {
		t.Errorf("vfio group node %d left after unbind", group1)
	}
	f.write(t, "devices/pci0000:00/"+vf1+"/driver_override", "")
	f.write(t, "bus/pci/drivers_probe", vf1)
	waitFor(t, time.Second, "probe to iavf", driverIs(vf1, DriverVF))

	// numvfs 0 unbinds everything and clears the driver links.
	f.write(t, pfDir(0)+"/sriov_numvfs", "0")
	waitFor(t, time.Second, "VFs removed", func() bool { return f.virtfnCount(0) == 0 })
	for _, d := range []string{DriverVF, DriverVFIO} {
		for _, vf := range []string{vf0, vf1} {
			if exists(filepath.Join(f.tree.DriverDir(d), vf)) {
				t.Errorf("drivers/%s/%s left after numvfs=0", d, vf)
			}
		}
	}
	if exists(filepath.Join(f.vfio, fmt.Sprint(group))) {
		t.Errorf("vfio group node left after numvfs=0")
	}
	if d := f.tree.Driver(PFBDF(0)); d != DriverPF {
		t.Errorf("PF driver = %q", d)
	}
}

func TestEmulatorVFNetdevs(t *testing.T) {
	pfPrefix := fmt.Sprintf("rgn%d", os.Getpid()%1000)
	f := startEmulator(t, pfPrefix, fmt.Sprintf("rg-emu-%d", os.Getpid()))
	vfName := func(j int) string { return fmt.Sprintf("%s0v%d", pfPrefix, j) }
	t.Cleanup(func() {
		for j := 0; j < 3; j++ {
			if l, err := netlink.LinkByName(vfName(j)); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	})
	f.write(t, pfDir(0)+"/sriov_numvfs", "3")
	took := waitFor(t, time.Second, "3 VFs", func() bool { return f.virtfnCount(0) == 3 })
	t.Logf("3 VFs with netdevs after %v", took)
	for j := 0; j < 3; j++ {
		l, err := netlink.LinkByName(vfName(j))
		if err != nil {
			t.Fatalf("VF netdev %s: %v", vfName(j), err)
		}
		mac, err := ReadAttr(filepath.Join(f.tree.DeviceDir(VFBDF(PFBDF(0), j)), "net", vfName(j), "address"))
		if err != nil {
			t.Fatal(err)
		}
		if mac != l.Attrs().HardwareAddr.String() {
			t.Errorf("tree MAC %s != link MAC %s", mac, l.Attrs().HardwareAddr)
		}
	}
	// Unbinding from iavf takes the netdev away, as the real driver does.
	f.write(t, "bus/pci/drivers/iavf/unbind", VFBDF(PFBDF(0), 2))
	waitFor(t, time.Second, "netdev of unbound VF gone", func() bool {
		_, err := netlink.LinkByName(vfName(2))
		return err != nil
	})
	if exists(filepath.Join(f.tree.DeviceDir(VFBDF(PFBDF(0), 2)), "net")) {
		t.Errorf("net dir of unbound VF left")
	}
	// A VF netdev moved into another netns (a node) still goes away.
	nodeNs := fmt.Sprintf("rg-emunode-%d", os.Getpid())
	t.Cleanup(func() {
		if err := nsutil.Delete(nodeNs); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := nsutil.Create(nodeNs); err != nil {
		t.Fatal(err)
	}
	ns, err := netns.GetFromName(nodeNs)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	l0, err := netlink.LinkByName(vfName(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(l0, int(ns)); err != nil {
		t.Fatalf("moving VF netdev: %v", err)
	}
	inNode, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer inNode.Close()
	if _, err := inNode.LinkByName(vfName(0)); err != nil {
		t.Fatalf("moved VF netdev not in node netns: %v", err)
	}

	f.write(t, pfDir(0)+"/sriov_numvfs", "0")
	waitFor(t, time.Second, "VF netdevs gone", func() bool {
		if _, err := inNode.LinkByName(vfName(0)); err == nil {
			return false
		}
		for j := 0; j < 3; j++ {
			if _, err := netlink.LinkByName(vfName(j)); err == nil {
				return false
			}
		}
		return true
	})
}
