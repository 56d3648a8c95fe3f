package testutil

import (
	"errors"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// LinkList lists h's links (the current netns's when h is nil), again when
// the kernel interrupted the dump: tests beside it change links, and netlink
// v1.3.1 then returns partial results with ErrDumpInterrupted. The product
// retries its own dumps the same way (pkg/sriov handleLinks).
func LinkList(h *netlink.Handle) ([]netlink.Link, error) {
	list := netlink.LinkList
	if h != nil {
		list = h.LinkList
	}
	links, err := list()
	for i := 0; i < 10 && errors.Is(err, netlink.ErrDumpInterrupted); i++ {
		links, err = list()
	}
	return links, err
}

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
