package testutil

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// HandleAt is a NETLINK_ROUTE handle in the netns pinned at path (the
// current netns for ""), closed by the test's cleanup.
func HandleAt(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	ns := netns.None()
	if path != "" {
		var err error
		if ns, err = netns.GetFromPath(path); err != nil {
			t.Fatalf("opening netns %s: %v", path, err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in netns %s: %v", path, err)
	}
	t.Cleanup(h.Close)
	return h
}

// LinkWithMAC is the link of links whose hardware address is mac (in any
// case), nil when none is.
func LinkWithMAC(links []netlink.Link, mac string) netlink.Link {
	for _, l := range links {
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l
		}
	}
	return nil
}
