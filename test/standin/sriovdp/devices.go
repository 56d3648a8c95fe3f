package main

import (
	"fmt"
	"os"
	"path/filepath"
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
	acpiIndex  string
	numaNode   int    // -1 when unknown
	iommuGroup string // "" without an iommu_group link
	noIOMMU    bool   // the group's name is vfio-noiommu
}

// discover lists the network-class functions under <root>/bus/pci/devices,
// as cmd/sriovdp/manager.go discoverHostDevices and
// netdevice/netDeviceProvider.go AddTargetDevices do: class 0x02, leaving
// out SR-IOV PFs that have VFs. (Upstream also leaves out a function whose
// netdev carries the default route; no stand-in PF or VF ever does.)
func discover(root string) ([]string, error) {
	dir := filepath.Join(root, "bus", "pci", "devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discoverHostDevices(): error getting PCI info: %w", err)
	}
	var out []string
	for _, e := range entries {
		bdf := e.Name()
		if !strings.HasPrefix(strings.TrimPrefix(readTrim(filepath.Join(dir, bdf, "class")), "0x"), "02") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, bdf, "sriov_totalvfs")); err == nil {
			if n, _ := strconv.Atoi(readTrim(filepath.Join(dir, bdf, "sriov_numvfs"))); n > 0 {
				continue
			}
		}
		out = append(out, bdf)
	}
	return out, nil
}

// newDevice reads one function as NewPciNetDevice does. Like upstream, a
// function without a driver is an error (utils.GetDriverName): it joins
// no pool.
func newDevice(root, bdf string, excludeTopology bool) (*device, error) {
	dir := filepath.Join(root, "bus", "pci", "devices", bdf)
	drv, err := os.Readlink(filepath.Join(dir, "driver"))
	if err != nil {
		return nil, fmt.Errorf("error getting driver info for device %s %v", bdf, err)
	}
	d := &device{bdf: bdf, driver: filepath.Base(drv), funcID: -1, numaNode: -1,
		vendor: strings.TrimPrefix(readTrim(filepath.Join(dir, "vendor")), "0x"),
		code:   strings.TrimPrefix(readTrim(filepath.Join(dir, "device")), "0x"),
	}
	if pf, err := os.Readlink(filepath.Join(dir, "physfn")); err == nil {
		d.pfBDF = filepath.Base(pf)
		// utils.GetPfName: the first name in physfn/net, in the caller's
		// netns (sysfs shows the netdevs of the netns it was mounted in;
		// the rig's FUSE tree those of the reading thread).
		if names := dirNames(filepath.Join(dir, "physfn", "net")); len(names) > 0 {
			d.pfName = names[0]
		}
		// utils.GetVFID: the n of the PF's virtfn<n> pointing here.
		for n := 0; ; n++ {
			t, err := os.Readlink(filepath.Join(dir, "physfn", "virtfn"+strconv.Itoa(n)))
			if err != nil {
				break
			}
			if filepath.Base(t) == bdf {
				d.funcID = n
				break
			}
		}
	}
	if names := dirNames(filepath.Join(dir, "net")); len(names) > 0 {
		d.ifName = names[0]
	}
	d.acpiIndex = readTrim(filepath.Join(dir, "acpi_index"))
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
	if len(s.LinkTypes) > 0 && !selectIn(s.LinkTypes, linkType(d)) {
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
	if len(list) == 0 {
		return true
	}
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
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

// linkType is devices/gen_net.go's link type: the netlink encapsulation
// of the function's netdev, or of its PF's when it has none.
func linkType(d *device) string {
	name := d.ifName
	if name == "" {
		name = d.pfName
	}
	if name == "" {
		return ""
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return ""
	}
	return l.Attrs().EncapType
}

// selectPools builds each pool as cmd/sriovdp/manager.go initServers does:
// pools in config order, selectors in order, a device taken by the first
// pool and selector that matches it, and pools without devices left out.
func selectPools(root string, list []*resourceConfig, warnf func(string, ...any)) (map[*resourceConfig][]*device, error) {
	bdfs, err := discover(root)
	if err != nil {
		return nil, err
	}
	out := map[*resourceConfig][]*device{}
	taken := map[string]bool{}
	for _, rc := range list {
		var pool []*device
		for _, s := range rc.selectors {
			for _, bdf := range bdfs {
				d, err := newDevice(root, bdf, rc.ExcludeTopology)
				if err != nil {
					continue
				}
				if !s.matches(d) || taken[bdf] {
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
	return out, nil
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
