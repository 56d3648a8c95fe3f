package sriov

import (
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestNetlinkHandlesAskForTheRouteFamilyOnly(t *testing.T) {
	h, err := routeHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ns, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ha, err := routeHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	for name, h := range map[string]interface{ SupportsNetlinkFamily(int) bool }{"routeHandle": h, "routeHandleAt": ha} {
		if !h.SupportsNetlinkFamily(unix.NETLINK_ROUTE) {
			t.Errorf("%s: no route socket", name)
		}
		for _, f := range []int{unix.NETLINK_XFRM, unix.NETLINK_NETFILTER} {
			if h.SupportsNetlinkFamily(f) {
				t.Errorf("%s opened netlink family %d, which a host without its module refuses", name, f)
			}
		}
	}
}
