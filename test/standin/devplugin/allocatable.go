package devplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// vf is one VF as the selectors see it.
type vf struct {
	bdf, vendor, device, driver string
	pfName                      string // the PF's link name in the caller's netns
	pfBDF                       string
	index                       int
	iommuGroup                  string // "" when the VF has no iommu_group link
	numaNode                    int    // -1 when unknown
}

// Device is one VF a resource selected.
type Device struct {
	BDF, PFName, PFBDF, Driver, IOMMUGroup string
	NUMANode                               int
}

// Devices lists, per "<prefix>/<name>" resource (defaultPrefix for those
// without resourcePrefix), the VFs its selectors pick among the PFs present
// among links, by PCI address. Like upstream, a VF belongs to the first
// resource that selects it; resources with no VF are present and empty.
func Devices(sysfsRoot string, cfg *Config, defaultPrefix string, links []netlink.Link) (map[string][]Device, error) {
	vfs, err := visibleVFs(sysfsRoot, links)
	if err != nil {
		return nil, err
	}
	out := map[string][]Device{}
	claimed := map[string]bool{}
	for _, r := range cfg.ResourceList {
		key := r.Key(defaultPrefix)
		out[key] = []Device{}
		for _, v := range vfs {
			if claimed[v.bdf] || !r.selects(v) {
				continue
			}
			claimed[v.bdf] = true
			out[key] = append(out[key], Device{BDF: v.bdf, PFName: v.pfName, PFBDF: v.pfBDF, Driver: v.driver, IOMMUGroup: v.iommuGroup, NUMANode: v.numaNode})
		}
	}
	return out, nil
}

// Allocatable counts, per "<prefix>/<name>" resource, the VFs of the PFs
// present among links (matched to sysfs by MAC) that the resource's
// selectors pick. Like upstream, a VF counts for the first resource that
// selects it only, and resources with no VF are left out.
func Allocatable(sysfsRoot string, dpConfig []byte, links []netlink.Link) (map[string]int64, error) {
	cfg, err := ParseConfig(dpConfig)
	if err != nil {
		return nil, err
	}
	vfs, err := visibleVFs(sysfsRoot, links)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	claimed := map[string]bool{}
	for _, r := range cfg.ResourceList {
		for _, v := range vfs {
			if claimed[v.bdf] || !r.selects(v) {
				continue
			}
			claimed[v.bdf] = true
			out[r.key()]++
		}
	}
	return out, nil
}

// visibleVFs lists the VFs of every sysfs PF whose netdev MAC belongs to
// one of links.
func visibleVFs(root string, links []netlink.Link) ([]vf, error) {
	byMAC := map[string]string{}
	for _, l := range links {
		if a := l.Attrs(); a != nil && len(a.HardwareAddr) > 0 {
			byMAC[strings.ToLower(a.HardwareAddr.String())] = a.Name
		}
	}
	devDir := filepath.Join(root, "bus", "pci", "devices")
	entries, err := os.ReadDir(devDir)
	if err != nil {
		return nil, fmt.Errorf("listing PCI devices in %s: %w", root, err)
	}
	var out []vf
	for _, en := range entries {
		pfDir := filepath.Join(devDir, en.Name())
		if _, err := os.Stat(filepath.Join(pfDir, "sriov_totalvfs")); err != nil {
			continue
		}
		pfName := linkOf(pfDir, byMAC)
		if pfName == "" {
			continue // the PF is in another netns
		}
		fns, err := filepath.Glob(filepath.Join(pfDir, "virtfn*"))
		if err != nil {
			return nil, err
		}
		for _, fn := range fns {
			idx, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(fn), "virtfn"))
			if err != nil {
				continue
			}
			target, err := os.Readlink(fn)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", fn, err)
			}
			v := vf{bdf: filepath.Base(target), pfName: pfName, pfBDF: en.Name(), index: idx, numaNode: -1,
				vendor: readID(filepath.Join(fn, "vendor")), device: readID(filepath.Join(fn, "device"))}
			if d, err := os.Readlink(filepath.Join(fn, "driver")); err == nil {
				v.driver = filepath.Base(d)
			}
			if g, err := os.Readlink(filepath.Join(fn, "iommu_group")); err == nil {
				v.iommuGroup = filepath.Base(g)
			}
			if b, err := os.ReadFile(filepath.Join(fn, "numa_node")); err == nil {
				if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					v.numaNode = n
				}
			}
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bdf < out[j].bdf })
	return out, nil
}

// linkOf returns the name, in the caller's netns, of the link whose MAC is
// one of the PF's net/*/address values; "" if none.
func linkOf(pfDir string, byMAC map[string]string) string {
	addrs, _ := filepath.Glob(filepath.Join(pfDir, "net", "*", "address"))
	for _, a := range addrs {
		b, err := os.ReadFile(a)
		if err != nil {
			continue
		}
		if name, ok := byMAC[strings.ToLower(strings.TrimSpace(string(b)))]; ok {
			return name
		}
	}
	return ""
}

func readID(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return normID(string(b))
}

// normID makes "0x8086\n" and "8086" compare equal.
func normID(s string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
}

func (r Resource) selects(v vf) bool {
	for _, s := range r.Selectors {
		if s.matches(v) {
			return true
		}
	}
	return false
}

func (s Selector) matches(v vf) bool {
	anyOf := func(list []string, val string, norm func(string) string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if norm(x) == val {
				return true
			}
		}
		return false
	}
	same := func(x string) string { return strings.TrimSpace(x) }
	if !anyOf(s.Vendors, v.vendor, normID) || !anyOf(s.Devices, v.device, normID) ||
		!anyOf(s.Drivers, v.driver, same) || !anyOf(s.PCIAddresses, v.bdf, same) {
		return false
	}
	if len(s.PFNames) == 0 {
		return true
	}
	for _, p := range s.PFNames {
		if pfNameMatches(p, v) {
			return true
		}
	}
	return false
}

// pfNameMatches handles "name" and "name#ranges", ranges being a comma
// list of VF indexes or a-b spans.
func pfNameMatches(entry string, v vf) bool {
	name, ranges, hasRange := strings.Cut(strings.TrimSpace(entry), "#")
	if name != v.pfName {
		return false
	}
	if !hasRange {
		return true
	}
	for _, part := range strings.Split(ranges, ",") {
		lo, hi, isSpan := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			continue
		}
		b := a
		if isSpan {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				continue
			}
		}
		if v.index >= a && v.index <= b {
			return true
		}
	}
	return false
}
