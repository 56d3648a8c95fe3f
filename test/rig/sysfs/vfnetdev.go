package sysfs

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// vfNetdevs makes the links that stand in for VF netdevs. Each is a veth
// whose host end (the "VF netdev") appears in the emulator's netns, like a
// real VF netdev appears in the initial netns, and whose other end stays
// in a private netns the rig owns. Deleting that private end destroys the
// pair wherever the VF end has been moved, so removal never has to hunt
// for the VF across namespaces. (A macvlan on the PF was the alternative;
// it dies with the PF's netns and has to be created where the PF is,
// which the emulator cannot know cheaply.)
type vfNetdevs struct {
	peerNs netns.NsHandle
	peer   *netlink.Handle
}

func openVFNetdevs(peerNetns string) (*vfNetdevs, error) {
	ns, err := netns.GetFromName(peerNetns)
	if err != nil {
		return nil, fmt.Errorf("opening VF peer netns %s: %w", peerNetns, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink handle in VF peer netns %s: %w", peerNetns, err)
	}
	return &vfNetdevs{peerNs: ns, peer: h}, nil
}

func (v *vfNetdevs) Close() {
	v.peer.Close()
	v.peerNs.Close()
}

// add creates the VF netdev name (peer end named the same in the private
// netns) and returns its MAC. An existing pair is reused, which makes a
// restarted emulator converge instead of failing.
func (v *vfNetdevs) add(name string) (string, error) {
	if l, err := netlink.LinkByName(name); err == nil {
		if _, perr := v.peer.LinkByName(name); perr == nil {
			return l.Attrs().HardwareAddr.String(), nil
		}
		return "", fmt.Errorf("creating VF netdev %s: a link of that name already exists and is not ours", name)
	}
	// Stale private end (its VF end was deleted by someone): drop it.
	if old, err := v.peer.LinkByName(name); err == nil {
		_ = v.peer.LinkDel(old)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name},
		PeerName:      name,
		PeerNamespace: netlink.NsFd(int(v.peerNs)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return "", fmt.Errorf("creating VF netdev %s: %w", name, err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("reading VF netdev %s: %w", name, err)
	}
	if p, err := v.peer.LinkByName(name); err == nil {
		_ = v.peer.LinkSetUp(p)
	}
	return l.Attrs().HardwareAddr.String(), nil
}

// remove destroys the VF netdev name wherever it is now.
func (v *vfNetdevs) remove(name string) error {
	p, err := v.peer.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("finding VF netdev peer %s: %w", name, err)
	}
	if err := v.peer.LinkDel(p); err != nil {
		return fmt.Errorf("deleting VF netdev %s: %w", name, err)
	}
	return nil
}
