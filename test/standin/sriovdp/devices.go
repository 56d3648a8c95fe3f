package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// Upstream facts cited below are from
// k8snetworkplumbingwg/sriov-network-device-plugin at v3.11.0.

// device is one PCI network function as the netDevice provider sees it
// (netdevice/pciNetDevice.go, devices/gen_net.go, devices/host.go).
type device struct {
	bdf        string
	vendor     string // ghw's Vendor.ID: the sysfs value without "0x"
	code       string // ghw's Product.ID
	driver     string
	pfName     string // first entry of physfn/net ("" for a PF or when the PF's netdev is elsewhere)
	pfBDF      string // physfn's target ("" for a PF)
	ifName     string // first entry of net ("" without a netdev)
	funcID     int    // VF index, -1 for a PF
	linkType   string // the netlink encapsulation of ifName, or of pfName without one
	acpiIndex  string
	numaNode   int    // -1 when unknown
	iommuGroup string // "" without an iommu_group link
	noIOMMU    bool   // the group's name is vfio-noiommu
}

// netView is what the plugin asks netlink about a netdev, in the netns it
// runs in (the node's: the pod is hostNetwork).
type netView interface {
	// encap is the link's encapsulation type (devices/gen_net.go's link
	// type), an error when there is no such link.
	encap(name string) (string, error)
	// defaultRoute says whether an IPv4 route without destination leaves
	// through the link (utils.HasDefaultRoute).
	defaultRoute(name string) (bool, error)
}

// hostNet is netView through netlink, with the calls upstream makes
// (pkg/utils/netlink_provider.go GetLinkAttrs, GetIPv4RouteList) at the
// same netlink version (v1.3.1, upstream's go.mod).
type hostNet struct{}

func (hostNet) encap(name string) (string, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("error getting link attributes for net device %s %v", name, err)
	}
	return l.Attrs().EncapType, nil
}

func (hostNet) defaultRoute(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return false, err
	}
	routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
	if err != nil {
		return false, err
	}
	for _, r := range routes {
		if r.Dst == nil {
			return true, nil
		}
	}
	return false, nil
}

// discover lists the network-class functions under <root>/bus/pci/devices,
// as cmd/sriovdp/manager.go discoverHostDevices and
// netdevice/netDeviceProvider.go AddTargetDevices do: class 0x02, leaving
// out a function whose netdev carries an IPv4 default route and SR-IOV PFs
// that have VFs. An unreadable directory is no devices and a warning, as
// with jaypipes/ghw pkg/pci/pci_linux.go@v0.19.1 getDevices. ghw reads the
// class (and vendor and device) from modalias, which the rig's sysfs does
// not have; the kernel derives modalias from the same configuration space
// values that the class, vendor and device files show, and those are read
// instead.
func discover(root string, nv netView, warnf func(string, ...any)) []string {
	dir := filepath.Join(root, "bus", "pci", "devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		warnf("failed to read %s: %v", dir, err)
		return nil
	}
	var out []string
	for _, e := range entries {
		bdf := e.Name()
		if !strings.HasPrefix(strings.TrimPrefix(readTrim(filepath.Join(dir, bdf, "class")), "0x"), "02") {
			continue
		}
		if hasDefaultRoute(root, bdf, nv, warnf) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, bdf, "sriov_totalvfs")); err == nil {
			if n, _ := strconv.Atoi(readTrim(filepath.Join(dir, bdf, "sriov_numvfs"))); n > 0 {
				continue
			}
		}
		out = append(out, bdf)
	}
	return out
}

// hasDefaultRoute is utils.HasDefaultRoute: any netdev of the function
// with an IPv4 route whose Dst is nil; a netdev netlink cannot read is
// skipped with an error logged.
func hasDefaultRoute(root, bdf string, nv netView, warnf func(string, ...any)) bool {
	for _, name := range dirNames(filepath.Join(root, "bus", "pci", "devices", bdf, "net")) {
		yes, err := nv.defaultRoute(name)
		if err != nil {
			warnf("failed to get routes for interface: %s, %q", name, err)
			continue
		}
		if yes {
			warnf("excluding interface %s: default route found", name)
			return true
		}
	}
	return false
}

// newDevice reads one function as netdevice/pciNetDevice.go
// NewPciNetDevice and devices/gen_net.go NewGenNetDevice do. As there, a
// function without a driver, whose physfn cannot be read, or whose netdev
// (or, without one, its PF's netdev) netlink does not know is an error: it
// joins no pool. The PF name is read from physfn/net as upstream does for
// a PF whose devlink eswitch mode cannot be read (utils.GetPfName): a
// stand-in PF is a veth, with no devlink device, so never in switchdev
// mode.
func newDevice(root, bdf string, excludeTopology bool, nv netView) (*device, error) {
	dir := filepath.Join(root, "bus", "pci", "devices", bdf)
	drv, err := os.Readlink(filepath.Join(dir, "driver"))
	if err != nil {
		return nil, fmt.Errorf("error getting driver info for device %s %v", bdf, err)
	}
	d := &device{bdf: bdf, driver: filepath.Base(drv), funcID: -1, numaNode: -1,
		vendor: strings.TrimPrefix(readTrim(filepath.Join(dir, "vendor")), "0x"),
		code:   strings.TrimPrefix(readTrim(filepath.Join(dir, "device")), "0x"),
	}
	if _, err := os.Stat(filepath.Join(dir, "physfn")); err == nil {
		// utils.GetPfName: the first name in physfn/net, in the caller's
		// netns (sysfs shows the netdevs of the netns it was mounted in;
		// the rig's FUSE tree those of the reading thread). Any failure
		// is a warning upstream and leaves the name empty.
		if names := dirNames(filepath.Join(dir, "physfn", "net")); len(names) > 0 {
			d.pfName = names[0]
		}
	}
	if pf, err := os.Readlink(filepath.Join(dir, "physfn")); err == nil {
		d.pfBDF = filepath.Base(pf)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("error getting PF for PCI device %s %v", bdf, err)
	}
	if d.funcID, err = vfID(dir, bdf); err != nil {
		return nil, err
	}
	if names := dirNames(filepath.Join(dir, "net")); len(names) > 0 {
		d.ifName = names[0]
	}
	if name := cmp.Or(d.ifName, d.pfName); name != "" {
		if d.linkType, err = nv.encap(name); err != nil {
			return nil, err
		}
	}
	if d.acpiIndex, err = acpiIndex(dir, bdf); err != nil {
		return nil, err
	}
	if !excludeTopology {
		if n, err := strconv.Atoi(readTrim(filepath.Join(dir, "numa_node"))); err == nil {
			d.numaNode = n
		}
	}
	if g, err := filepath.EvalSymlinks(filepath.Join(dir, "iommu_group")); err == nil {
		d.iommuGroup = filepath.Base(g)
		// utils.GetVFIODeviceFile: a group named vfio-noiommu is
		// /dev/vfio/noiommu-<n> on the host.
		d.noIOMMU = readTrim(filepath.Join(g, "name")) == "vfio-noiommu"
	}
	return d, nil
}

// vfID is utils.GetVFID: -1 without physfn; else the n below the number
// of physfn/virtfn* entries whose virtfn<n> resolves to a path containing
// the address, -1 when none does.
func vfID(dir, bdf string) (int, error) {
	pf := filepath.Join(dir, "physfn")
	if _, err := os.Lstat(pf); errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	} else if err != nil {
		return -1, fmt.Errorf("could not get PF directory information for VF device: %s, Err: %v", bdf, err)
	}
	links, err := filepath.Glob(filepath.Join(pf, "virtfn*"))
	if err != nil {
		return -1, fmt.Errorf("error reading VF directories %v", err)
	}
	for n := range links {
		p := filepath.Join(pf, "virtfn"+strconv.Itoa(n))
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if t, err := filepath.EvalSymlinks(p); err == nil && strings.Contains(t, bdf) {
			return n, nil
		}
	}
	return -1, nil
}

// acpiIndex is utils.GetAcpiIndex: "" without the file, its trimmed
// content, an error when it cannot be read.
func acpiIndex(dir, bdf string) (string, error) {
	p := filepath.Join(dir, "acpi_index")
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("error getting ACPI index for device %s %v", bdf, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("error getting ACPI index for device %s %v", bdf, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// matches is netdevice/netDeviceProvider.go GetFilteredDevices for one
// selector: every non-empty selector narrows (factory.go FilterBySelector).
// ddpProfiles, pKeys, isRdma and vdpaType select only devices that have
// DDP profiles, an InfiniBand pKey, RDMA or vDPA: no stand-in function has
// any, so they select nothing, as on a NIC without those features.
func (s *netSelector) matches(d *device) bool {
	if !selectIn(s.Vendors, d.vendor) || !selectIn(s.Devices, d.code) || !selectIn(s.Drivers, d.driver) ||
		!selectIn(s.PciAddresses, d.bdf) || !selectIn(s.AcpiIndexes, d.acpiIndex) {
		return false
	}
	if len(s.PfNames) > 0 && (d.pfName == "" || !indexSelected(s.PfNames, d.pfName, d.funcID)) {
		return false
	}
	if len(s.RootDevices) > 0 && (d.pfBDF == "" || !indexSelected(s.RootDevices, d.pfBDF, d.funcID)) {
		return false
	}
	if len(s.LinkTypes) > 0 && !selectIn(s.LinkTypes, d.linkType) {
		return false
	}
	if len(s.DDPProfiles) > 0 || len(s.PKeys) > 0 || s.IsRdma || s.VdpaType != "" {
		return false
	}
	return true
}

// selectIn is resources/deviceSelectors.go contains behind an unset or
// set selector list.
func selectIn(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, v)
}

// indexSelected is the pfNames and rootDevices selectors
// (resources/deviceSelectors.go getItem and isSelected): the first entry
// whose part before '#' equals name, case-insensitively, and then either
// no '#' or a comma list of indexes and a-b ranges containing idx. A
// malformed entry selects nothing.
func indexSelected(list []string, name string, idx int) bool {
	item := ""
	for _, x := range list {
		if strings.EqualFold(strings.Split(x, "#")[0], name) {
			item = x
			break
		}
	}
	if item == "" {
		return false
	}
	if !strings.Contains(item, "#") {
		return true
	}
	fields := strings.Split(item, "#")
	if len(fields) != 2 {
		return false
	}
	for _, e := range strings.Split(fields[1], ",") {
		if strings.Contains(e, "-") {
			rng := strings.Split(e, "-")
			if len(rng) != 2 {
				return false
			}
			lo, err1 := strconv.Atoi(rng[0])
			hi, err2 := strconv.Atoi(rng[1])
			if err1 != nil || err2 != nil {
				return false
			}
			if idx >= lo && idx <= hi {
				return true
			}
			continue
		}
		n, err := strconv.Atoi(e)
		if err != nil {
			return false
		}
		if idx == n {
			return true
		}
	}
	return false
}

// selectPools builds each pool as cmd/sriovdp/manager.go initServers does:
// pools in config order, selectors in order, a device taken by the first
// pool and selector that matches it, and pools without devices left out.
// A pool holding a function bound to uio or igb_uio is refused: upstream
// gives those the uio info provider (factory.go GetDefaultInfoProvider,
// /dev/uioN device specs), which the stand-in does not have.
func selectPools(root string, list []*resourceConfig, nv netView, warnf func(string, ...any)) map[*resourceConfig][]*device {
	bdfs := discover(root, nv, warnf)
	if len(bdfs) == 0 {
		warnf("discoverHostDevices(): no PCI network device found")
	}
	out := map[*resourceConfig][]*device{}
	taken := map[string]bool{}
	for _, rc := range list {
		var pool []*device
		for _, s := range rc.selectors {
			for _, bdf := range bdfs {
				d, err := newDevice(root, bdf, rc.ExcludeTopology, nv)
				if err != nil {
					warnf("netdevice GetDevices(): error creating new device: %q", err)
					continue
				}
				if !s.matches(d) {
					continue
				}
				if taken[bdf] {
					warnf("Cannot add device [%s]. Already allocated.", bdf)
					continue
				}
				taken[bdf] = true
				pool = append(pool, d)
			}
		}
		if len(pool) == 0 {
			warnf("no devices in device pool, skipping creating resource server for %s", rc.ResourceName)
			continue
		}
		out[rc] = pool
	}
	return out
}

// uioRefused names a pool's function that upstream would serve through its
// uio info provider.
func uioRefused(pools map[*resourceConfig][]*device) error {
	for rc, devs := range pools {
		for _, d := range devs {
			if d.driver == "uio" || d.driver == "igb_uio" {
				return &exit{code: 1, err: fmt.Errorf("resource %s: %s is bound to %s, whose device specs (/dev/uioN) the stand-in device plugin does not implement", rc.ResourceName, d.bdf, d.driver)}
			}
		}
	}
	return nil
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// dirNames lists a directory's entries in name order (os.ReadDir, as
// upstream reads net/ directories).
func dirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
