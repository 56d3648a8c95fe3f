package devplugin

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

const (
	mac0 = "02:00:00:dd:00:01"
	mac1 = "02:00:00:dd:00:02"
)

// fakeTree makes PF 0 with 4 VFs (0,1 on vfio-pci, 2,3 on iavf) and PF 1
// with 3 VFs on vfio-pci, driving the emulator synchronously (no root).
func fakeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := sysfs.Build(root, []sysfs.PF{{Name: "rgd0", MAC: mac0}, {Name: "rgd1", MAC: mac1}}); err != nil {
		t.Fatal(err)
	}
	em := sysfs.NewEmulator(sysfs.EmulatorConfig{Root: root})
	tree := sysfs.Tree{Root: root}
	write := func(p, v string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(v + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	toVFIO := func(bdf string) {
		write(filepath.Join(tree.DriverDir(sysfs.DriverVF), "unbind"), bdf)
		em.Sync()
		write(filepath.Join(tree.DeviceDir(bdf), "driver_override"), sysfs.DriverVFIO)
		write(filepath.Join(tree.DriverDir(sysfs.DriverVFIO), "bind"), bdf)
		em.Sync()
		if d := tree.Driver(bdf); d != sysfs.DriverVFIO {
			t.Fatalf("fixture: %s driver %q", bdf, d)
		}
	}
	for pf, n := range []int{4, 3} {
		write(filepath.Join(tree.DeviceDir(sysfs.PFBDF(pf)), "sriov_numvfs"), string(rune('0'+n)))
		em.Sync()
	}
	for _, vf := range []string{
		sysfs.VFBDF(sysfs.PFBDF(0), 0), sysfs.VFBDF(sysfs.PFBDF(0), 1),
		sysfs.VFBDF(sysfs.PFBDF(1), 0), sysfs.VFBDF(sysfs.PFBDF(1), 1), sysfs.VFBDF(sysfs.PFBDF(1), 2),
	} {
		toVFIO(vf)
	}
	return root
}

func link(t *testing.T, name, mac string) netlink.Link {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatal(err)
	}
	return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: hw}}
}

func TestAllocatable(t *testing.T) {
	root := fakeTree(t)
	// Only PF 0 is in "this netns", renamed net1; PF 1 is elsewhere, and
	// a link with an unknown MAC is ignored.
	links := []netlink.Link{link(t, "net1", mac0), link(t, "eth0", "02:00:00:ee:ee:ee")}
	both := append(links, link(t, "net2", mac1))

	cases := []struct {
		name  string
		cfg   string
		links []netlink.Link
		want  map[string]int64
	}{
		{"vfio by in-netns PF name", `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io",
			"selectors":[{"drivers":["vfio-pci"],"pfNames":["net1"]}]}]}`, links,
			map[string]int64{"kubevirt.io/sriov_net": 2}},
		{"legacy selectors object, default prefix", `{"resourceList":[{"resourceName":"sriov_net",
			"selectors":{"drivers":["vfio-pci"],"pfNames":["net1","net2"]}}]}`, both,
			map[string]int64{"intel.com/sriov_net": 5}},
		{"sysfs name is not the netns name", `{"resourceList":[{"resourceName":"r",
			"selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd0"]}]}]}`, links,
			map[string]int64{}},
		{"pfName VF range and vendor", `{"resourceList":[{"resourceName":"r",
			"selectors":[{"vendors":["8086"],"drivers":["iavf"],"pfNames":["net1#0-2"]}]}]}`, links,
			map[string]int64{"intel.com/r": 1}},
		{"device id mismatch", `{"resourceList":[{"resourceName":"r",
			"selectors":[{"devices":["1572"],"pfNames":["net1"]}]}]}`, links,
			map[string]int64{}},
		{"first resource claims a VF", `{"resourceList":[
			{"resourceName":"all","selectors":[{"pfNames":["net1"]}]},
			{"resourceName":"vfio","selectors":[{"drivers":["vfio-pci"]}]}]}`, both,
			map[string]int64{"intel.com/all": 4, "intel.com/vfio": 3}},
		{"pci address and device with 0x", `{"resourceList":[{"resourceName":"r",
			"selectors":[{"devices":["0x154c"],"pciAddresses":["0000:41:10.2","0000:40:10.3"]}]}]}`, both,
			map[string]int64{"intel.com/r": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Allocatable(root, []byte(c.cfg), c.links)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestAllocatableFollowsTreeChanges(t *testing.T) {
	root := fakeTree(t)
	cfg := []byte(`{"resourceList":[{"resourceName":"n","selectors":[{"drivers":["vfio-pci"]}]}]}`)
	links := []netlink.Link{link(t, "a", mac0), link(t, "b", mac1)}
	got, err := Allocatable(root, cfg, links)
	if err != nil || got["intel.com/n"] != 5 {
		t.Fatalf("before: %v %v", got, err)
	}
	tree := sysfs.Tree{Root: root}
	if err := os.WriteFile(filepath.Join(tree.DeviceDir(sysfs.PFBDF(1)), "sriov_numvfs"), []byte("0\n"), 0); err != nil {
		t.Fatal(err)
	}
	sysfs.NewEmulator(sysfs.EmulatorConfig{Root: root}).Sync()
	got, err = Allocatable(root, cfg, links)
	if err != nil || got["intel.com/n"] != 2 {
		t.Fatalf("after removing PF 1's VFs: %v %v", got, err)
	}
}

func TestAllocatableRejectsBadConfig(t *testing.T) {
	root := fakeTree(t)
	for name, cfg := range map[string]string{
		"not json":      `{"resourceList":`,
		"no name":       `{"resourceList":[{"selectors":[{}]}]}`,
		"accelerator":   `{"resourceList":[{"resourceName":"r","deviceType":"accelerator","selectors":[{}]}]}`,
		"duplicate":     `{"resourceList":[{"resourceName":"r","selectors":[{}]},{"resourceName":"r","selectors":[{}]}]}`,
		"bad selectors": `{"resourceList":[{"resourceName":"r","selectors":"x"}]}`,
	} {
		if _, err := Allocatable(root, []byte(cfg), nil); err == nil {
			t.Errorf("%s: accepted %s", name, cfg)
		}
	}
	if _, err := Allocatable(t.TempDir(), []byte(`{"resourceList":[]}`), nil); err == nil {
		t.Error("a root without bus/pci/devices was accepted")
	}
}
