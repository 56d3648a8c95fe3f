package sysfs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// netdev is one link of the caller's netns as sysfs shows it.
type netdev struct {
	name, mac, oper string
	ifindex, mtu    int
	// bdf is the PCI function whose netdev this is, "" for a virtual one.
	bdf string
}

// netView is what /sys/class/net and the functions' net/ directories
// show to one caller: the links of the caller's network namespace, as on
// a sysfs mounted in that namespace.
type netView struct {
	links []netdev
	byBDF map[string][]netdev
}

// callerNetView lists the links of the netns of the process that made the
// FUSE request (its thread, in fact: netns is per thread). A request with
// no caller (pid 0) or one that is gone sees the server's own netns.
// Nothing is cached: a netns handle held across requests would pin the
// namespace (and the links in it) past its owner's death.
func callerNetView(ctx context.Context, nic NIC, fns map[string]fnState) (*netView, error) {
	var ns netns.NsHandle = -1
	if c, ok := fuse.FromContext(ctx); ok && c.Pid != 0 {
		if h, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", c.Pid)); err == nil {
			ns = h
		}
	}
	var links []netlink.Link
	var err error
	if ns == -1 {
		links, err = nsutil.LinkList(nil)
	} else {
		h, herr := netlink.NewHandleAt(ns)
		ns.Close()
		if herr != nil {
			return nil, herr
		}
		links, err = nsutil.LinkList(h)
		h.Close()
	}
	if err != nil {
		return nil, err
	}
	// A function's netdev is the veth carrying its MAC, while a network
	// driver is bound to it (unbinding the driver unregisters the netdev).
	byMAC := map[string]string{}
	for bdf, f := range fns {
		if f.MAC != "" && nic.netDriver(f.Driver) {
			byMAC[f.MAC] = bdf
		}
	}
	v := &netView{byBDF: map[string][]netdev{}}
	for _, l := range links {
		a := l.Attrs()
		d := netdev{name: a.Name, mac: a.HardwareAddr.String(), oper: strings.ToLower(a.OperState.String()),
			ifindex: a.Index, mtu: a.MTU}
		if l.Type() == "veth" {
			d.bdf = byMAC[strings.ToLower(d.mac)]
		}
		v.links = append(v.links, d)
		if d.bdf != "" {
			v.byBDF[d.bdf] = append(v.byBDF[d.bdf], d)
		}
	}
	sort.Slice(v.links, func(i, j int) bool { return v.links[i].name < v.links[j].name })
	return v, nil
}

func (v *netView) byName(name string) (netdev, bool) {
	for _, d := range v.links {
		if d.name == name {
			return d, true
		}
	}
	return netdev{}, false
}
