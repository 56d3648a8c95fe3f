package sriov

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// routeHandle and routeHandleAt open netlink for links, addresses and
// routes only. Without a family netlink v1.3.1 opens a socket for every
// family it supports, XFRM and NETFILTER too (nl.SupportedNlFamilies), and
// on a host without the xfrm_user or nfnetlink module that fails with
// "protocol not supported" before anything is asked: so check failed in a
// QEMU guest with emulated igb PFs and no such modules.
func routeHandle() (*netlink.Handle, error) { return netlink.NewHandle(unix.NETLINK_ROUTE) }

func routeHandleAt(ns netns.NsHandle) (*netlink.Handle, error) {
	return netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
}
