package testutil

import (
	"errors"

	"github.com/vishvananda/netlink"
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
