package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// On the rig's FUSE sysfs, what the plugin sees depends on its netns, as
// with a real sysfs: in the node that holds the PF, physfn/net names it and
// pfNames selects its VFs; elsewhere the PF has no name and nothing is
// selected by pfNames. Run for every NIC the fake kernel knows: the plugin
// takes a VF's driver from its driver link, whichever driver that is.
func TestSelectionOnTheFUSERigFollowsTheCallersNetns(t *testing.T) {
	requireRoot(t, "serves the FUSE sysfs, makes a netns")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("needs /dev/fuse: %v", err)
	}
	for _, nic := range sysfs.NICs {
		t.Run(nic.VFDriver, func(t *testing.T) { testSelectionOnTheFUSERig(t, nic) })
	}
}

func testSelectionOnTheFUSERig(t *testing.T, nic sysfs.NIC) {
	id := os.Getpid() % 100000
	node, pfName := fmt.Sprintf("sdp-node-%d", id), fmt.Sprintf("sdpp%d", id)
	nodeNs := nsutil.ForTest(t, node)
	h, err := netlink.NewHandleAt(nodeNs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pfName}, PeerName: pfName + "x"}); err != nil {
		t.Fatal(err)
	}
	pf, err := h.LinkByName(pfName)
	if err != nil {
		t.Fatal(err)
	}
	// Before the netns goes: nsutil.Delete would also try the peer, gone
	// with its pair.
	t.Cleanup(func() { _ = h.LinkDel(pf) })

	dir := t.TempDir()
	root := filepath.Join(dir, "sys")
	sysfs.ServeForTest(t, sysfs.ServeConfig{SysfsDir: root,
		KernelConfig: sysfs.KernelConfig{PFs: []sysfs.PF{{Name: pfName, MAC: pf.Attrs().HardwareAddr.String()}},
			VFDriver: nic.VFDriver}})
	dev := func(bdf, attr string) string { return filepath.Join(root, "bus/pci/devices", bdf, attr) }
	store(t, dev(sysfs.PFBDF(0), "sriov_numvfs"), "2")
	store(t, dev(vf(0, 0), "driver_override"), sysfs.DriverVFIO)
	if d, err := os.Readlink(dev(vf(0, 0), "driver")); err == nil {
		store(t, filepath.Join(root, "bus/pci/drivers", filepath.Base(d), "unbind"), vf(0, 0))
	}
	store(t, filepath.Join(root, "bus/pci/drivers", sysfs.DriverVFIO, "bind"), vf(0, 0))

	// VF 1 stays on the VF driver autoprobe bound it to.
	cfg := `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice",
		"selectors":[{"drivers":["vfio-pci"],"pfNames":["` + pfName + `"]}]},
		{"resourceName":"vf_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice",
		"selectors":[{"drivers":["` + nic.VFDriver + `"],"pfNames":["` + pfName + `"]}]}]}`
	// Reads from a thread in the node's netns (the plugin's pod is
	// hostNetwork there).
	var ids map[string][]string
	err = nsutil.Do(nodeNs, func() (err error) {
		ids, err = selectIDs(root, cfg, hostNet{})
		return err
	})
	want := map[string][]string{"kubevirt.io/sriov_net": {vf(0, 0)}, "kubevirt.io/vf_net": {vf(0, 1)}}
	if err != nil || !reflect.DeepEqual(ids, want) {
		t.Errorf("in the node's netns: %v (%v), want %v", ids, err, want)
	}
	if got, err := selectIDs(root, cfg, hostNet{}); err != nil || len(got) != 0 {
		t.Errorf("in the host's netns, where the PF is not: %v (%v), want nothing", got, err)
	}
}
