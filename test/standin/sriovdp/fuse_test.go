package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// On the rig's FUSE sysfs, what the plugin sees depends on its netns, as
// with a real sysfs: in the node that holds the PF, physfn/net names it and
// pfNames selects its VFs; elsewhere the PF has no name and nothing is
// selected by pfNames.
func TestSelectionOnTheFUSERigFollowsTheCallersNetns(t *testing.T) {
	requireRoot(t, "serves the FUSE sysfs, makes a netns")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("needs /dev/fuse: %v", err)
	}
	id := os.Getpid() % 100000
	node, pfName := fmt.Sprintf("sdp-node-%d", id), fmt.Sprintf("sdpp%d", id)
	t.Cleanup(func() {
		if err := nsutil.Delete(node); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := nsutil.Create(node); err != nil {
		t.Fatal(err)
	}
	nodeNs, err := netns.GetFromName(node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeNs.Close() })
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
	srv, err := sysfs.Serve(sysfs.ServeConfig{SysfsDir: root,
		KernelConfig: sysfs.KernelConfig{PFs: []sysfs.PF{{Name: pfName, MAC: pf.Attrs().HardwareAddr.String()}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the fake sysfs: %v", err)
		}
	})
	dev := func(bdf, attr string) string { return filepath.Join(root, "bus/pci/devices", bdf, attr) }
	store(t, dev(sysfs.PFBDF(0), "sriov_numvfs"), "2")
	store(t, dev(vf(0, 0), "driver_override"), sysfs.DriverVFIO)
	if d, err := os.Readlink(dev(vf(0, 0), "driver")); err == nil {
		store(t, filepath.Join(root, "bus/pci/drivers", filepath.Base(d), "unbind"), vf(0, 0))
	}
	store(t, filepath.Join(root, "bus/pci/drivers", sysfs.DriverVFIO, "bind"), vf(0, 0))

	cfg := `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice",
		"selectors":[{"drivers":["vfio-pci"],"pfNames":["` + pfName + `"]}]}]}`
	// Reads from a thread in the node's netns (the plugin's pod is
	// hostNetwork there).
	type answer struct {
		ids map[string][]string
		err error
	}
	inNode := make(chan answer)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(nodeNs); err != nil {
			inNode <- answer{err: err}
			return
		}
		ids, err := selectIDs(root, cfg)
		inNode <- answer{ids, err}
	}()
	if got := <-inNode; got.err != nil || len(got.ids["kubevirt.io/sriov_net"]) != 1 || got.ids["kubevirt.io/sriov_net"][0] != vf(0, 0) {
		t.Errorf("in the node's netns: %v (%v), want only %s", got.ids, got.err, vf(0, 0))
	}
	if got := pools(t, root, cfg); len(got) != 0 {
		t.Errorf("in the host's netns, where the PF is not: %v, want nothing", got)
	}
}
