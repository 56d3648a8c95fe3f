package nsutil_test

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// TestDeleteTakesAVethWhosePeerIsInside: Delete lists the links once and
// deletes each, so a veth with both ends in the netns is already gone when
// its turn comes (the kernel deletes a veth's peer with it). That is the
// netns emptied, not a failure; a removed container's netns being torn
// down while Delete runs gives the same ENODEV.
func TestDeleteTakesAVethWhosePeerIsInside(t *testing.T) {
	testutil.RequireRoot(t)
	const name = "rg-nsdel"
	ns := nsutil.ForTest(t, name)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "rgnsd0"}, PeerName: "rgnsd1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("adding a veth pair in %s: %v", name, err)
	}
	if err := nsutil.Delete(name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if nsutil.Exists(name) {
		t.Fatalf("netns %s still mounted after Delete", name)
	}
}
