package sriov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PF is one SR-IOV physical function as discovery found it.
type PF struct {
	Name     string `json:"name"`
	PCI      string `json:"pci"`
	Vendor   string `json:"vendor"`
	Device   string `json:"device"`
	Driver   string `json:"driver"`
	TotalVFs int    `json:"totalVFs"`
	NumVFs   int    `json:"numVFs"`
	MAC      string `json:"mac"`
	// NUMANode is the device's NUMA node, -1 when the platform gives none
	// (as sysfs numa_node says; a QEMU guest without NUMA has -1).
	NUMANode int `json:"numaNode"`
	// Present says whether the netdev is in the caller's netns; a PF
	// already inside some node's netns is listed but not Present.
	Present bool `json:"present"`
	// Alias is the netdev's ifalias, where the host-device CNI plugin
	// keeps a PF's host name while a pod has it (pkg/fleet). Not in the
	// JSON: journal records and SRIOV_LANE_PFS keep their shape.
	Alias     string `json:"-"`
	OperState string `json:"operState,omitempty"`
	AdminUp   bool   `json:"adminUp"`
	MTU       int    `json:"mtu,omitempty"`
	// DefaultRoute and GlobalAddress mark a PF the host is using: it is
	// chosen only when pfs.include names it exactly (Selection.Allows).
	DefaultRoute  bool `json:"defaultRoute"`
	GlobalAddress bool `json:"globalAddress"`
	// EmulationReport says whether a hypervisor emulates the PF (QEMU's
	// igb); hooks see it in SRIOV_LANE_PFS.
	EmulationReport
}

func (p PF) String() string { return fmt.Sprintf("PF %s (%s)", p.Name, p.PCI) }

// InUse says whether the host depends on the PF for its own networking.
func (p PF) InUse() bool { return p.DefaultRoute || p.GlobalAddress }

// Discover lists every PCI function under the sysfs root with
// sriov_totalvfs > 0, matched by MAC to the netdevs of the caller's netns,
// sorted by PCI address.
func Discover(s Sysfs) ([]PF, error) {
	dir := filepath.Join(s.Root, "bus", "pci", "devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discovering PFs: reading %s: %w", dir, err)
	}
	links, err := listLinks()
	if err != nil {
		return nil, fmt.Errorf("discovering PFs: %w", err)
	}
	byMAC := map[string]netlink.Link{}
	for _, l := range links {
		if mac := l.Attrs().HardwareAddr.String(); mac != "" {
			byMAC[mac] = l
		}
	}
	routes, err := defaultRouteLinks()
	if err != nil {
		return nil, fmt.Errorf("discovering PFs: %w", err)
	}
	var out []PF
	for _, e := range ents {
		bdf := e.Name()
		total, err := s.ReadInt(bdf, "sriov_totalvfs")
		if err != nil || total <= 0 {
			continue // not an SR-IOV PF (VFs and other devices lack the attribute)
		}
		pf := PF{PCI: bdf, TotalVFs: total}
		pf.NumVFs, _ = s.ReadInt(bdf, "sriov_numvfs")
		if pf.NUMANode, err = s.ReadInt(bdf, "numa_node"); err != nil {
			pf.NUMANode = -1
		}
		pf.Vendor, _ = s.ReadAttr(bdf, "vendor")
		pf.Device, _ = s.ReadAttr(bdf, "device")
		pf.EmulationReport = EmulationOf(s, bdf)
		if pf.Driver, err = s.Driver(bdf); err != nil {
			return nil, fmt.Errorf("discovering PFs: %w", err)
		}
		macs, names := netMACs(s, bdf)
		if len(names) > 0 {
			pf.Name, pf.MAC = names[0], macs[0]
		}
		for _, mac := range macs {
			l, ok := byMAC[mac]
			if !ok {
				continue
			}
			a := l.Attrs()
			pf.Name, pf.MAC, pf.Present = a.Name, mac, true
			pf.Alias = a.Alias
			pf.OperState = a.OperState.String()
			pf.AdminUp = a.Flags&net.FlagUp != 0
			pf.MTU = a.MTU
			pf.DefaultRoute = routes[a.Index]
			if pf.GlobalAddress, err = hasGlobalAddr(l); err != nil {
				return nil, fmt.Errorf("discovering PFs: %s: %w", pf, err)
			}
			break
		}
		out = append(out, pf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PCI < out[j].PCI })
	return out, nil
}

// netMACs returns the MACs and names sysfs lists under the function's net/.
func netMACs(s Sysfs, bdf string) (macs, names []string) {
	ents, err := os.ReadDir(filepath.Join(s.Device(bdf), "net"))
	if err != nil {
		return nil, nil
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(s.Device(bdf), "net", e.Name(), "address"))
		if err != nil {
			continue
		}
		macs = append(macs, strings.ToLower(strings.TrimSpace(string(b))))
		names = append(names, e.Name())
	}
	return macs, names
}

// listLinks dumps links, retrying a dump the kernel interrupted (a link
// changed mid-dump), which netlink reports with partial results.
func listLinks() ([]netlink.Link, error) {
	h, err := routeHandle()
	if err != nil {
		return nil, fmt.Errorf("opening netlink: %w", err)
	}
	defer h.Close()
	return handleLinks(h)
}

func handleLinks(h *netlink.Handle) ([]netlink.Link, error) {
	links, err := dump(h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	return links, nil
}

// dump runs a netlink dump again while the kernel reports it interrupted
// (what it lists changed mid-dump): netlink then returns partial results,
// and a partial route or address list would hide the host's uplink from
// the checks that keep it out of a lane.
func dump[T any](list func() ([]T, error)) ([]T, error) {
	var err error
	for range 5 {
		var out []T
		if out, err = list(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, err
}

// Links lists the links in t's network namespace now.
func Links(ctx context.Context, t NetnsTarget) ([]netlink.Link, error) {
	tns, th, err := openTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	defer tns.Close()
	defer th.Close()
	return handleLinks(th)
}

// linkByMAC finds the link with mac through h, nil when absent.
func linkByMAC(h *netlink.Handle, mac string) (netlink.Link, error) {
	links, err := handleLinks(h)
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if stacked[l.Type()] {
			continue
		}
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l, nil
		}
	}
	return nil, nil
}

// stacked are link types that inherit (or may share) a lower device's MAC:
// a VLAN or bridge on the PF must never be mistaken for the PF itself.
var stacked = map[string]bool{
	"vlan": true, "macvlan": true, "macvtap": true, "ipvlan": true, "ipvtap": true,
	"bridge": true, "bond": true, "team": true, "vxlan": true,
}

// defaultRouteLinks returns the indexes of links carrying a default route.
func defaultRouteLinks() (map[int]bool, error) {
	routes, err := dump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	out := map[int]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		out[r.LinkIndex] = true
		for _, nh := range r.MultiPath {
			out[nh.LinkIndex] = true
		}
	}
	return out, nil
}

func hasGlobalAddr(l netlink.Link) (bool, error) {
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return false, fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		if a.Scope == unix.RT_SCOPE_UNIVERSE {
			return true, nil
		}
	}
	return false, nil
}
