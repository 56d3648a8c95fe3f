package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"
)

// The attribute names of a published VF (pkg/consts/consts.go@14490e9d438b).
const (
	driverName          = "sriovnetwork.k8snetworkplumbingwg.io"
	attrVendor          = driverName + "/vendor"
	attrDeviceID        = driverName + "/deviceID"
	attrPFDeviceID      = driverName + "/pfDeviceID"
	attrPCIAddress      = driverName + "/pciAddress"
	attrMultusDeviceID  = "k8s.cni.cncf.io/deviceID"
	attrPFName          = driverName + "/PFName"
	attrEswitchMode     = driverName + "/EswitchMode"
	attrVFID            = driverName + "/vfID"
	attrPfPCIAddress    = driverName + "/pfPciAddress"
	attrLinkType        = driverName + "/linkType"
	attrRDMACapable     = driverName + "/rdmaCapable"
	attrNUMANode        = "dra.net/numaNode"
	attrStandardPCIAddr = deviceattribute.StandardDeviceAttributePrefix + "pciBusID"
	netClass            = 0x02
)

// vfDevice is a discovered VF: the device the driver publishes, and the
// PCI address prepare works on.
type vfDevice struct {
	device resourceapi.Device
	pci    string
}

// discover finds the VFs as pkg/devicestate/discovery.go@14490e9d438b
// DiscoverSriovDevices does, once, at start: every PCI function of class
// 0x02 that is not a VF (no physfn link) and shows a netdev under its
// net/ (the first one listed) is a PF; each virtfnN link of it is a VF,
// named by its PCI address with ':' and '.' as '-'. No PCI function at
// all is fatal ("could not retrieve PCI devices"); a PF whose directory
// cannot be read fails discovery ("error getting VF list").
//
// Deviation: upstream lists functions with ghw, which reads each one's
// modalias; the rig's sysfs has none, so the stand-in reads the class,
// vendor and device files modalias is made from.
func discover(root string) (map[string]vfDevice, error) {
	pciDir := filepath.Join(root, "bus", "pci", "devices")
	ents, err := os.ReadDir(pciDir)
	if err != nil || len(ents) == 0 {
		return nil, fmt.Errorf("could not retrieve PCI devices")
	}
	type pf struct{ addr, netName, vendor, device, numa, root, link string }
	var pfs []pf
	for _, e := range ents {
		addr := e.Name()
		dir := filepath.Join(pciDir, addr)
		class, err := strconv.ParseInt(strings.TrimPrefix(readTrim(filepath.Join(dir, "class")), "0x"), 16, 64)
		if err != nil || class>>16 != netClass {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, "physfn")); err == nil {
			continue
		}
		name := firstEntry(filepath.Join(dir, "net"))
		if name == "" {
			continue // upstream: "Unable to get interface name for device, skipping"
		}
		numa := readTrim(filepath.Join(dir, "numa_node"))
		if numa == "" {
			numa = "-1"
		}
		pcieRoot := ""
		if a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(addr, deviceattribute.WithFSFromRoot(root)); err == nil && a.Value.StringValue != nil {
			pcieRoot = *a.Value.StringValue
		}
		pfs = append(pfs, pf{addr, name, hexID(filepath.Join(dir, "vendor")), hexID(filepath.Join(dir, "device")), numa, pcieRoot, linkType(root, name)})
	}
	out := map[string]vfDevice{}
	for _, p := range pfs {
		dir := filepath.Join(pciDir, p.addr)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("error getting VF list: failed to read PF directory: %v", err)
		}
		numa, err := strconv.ParseInt(p.numa, 10, 64)
		if err != nil {
			numa = -1
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "virtfn") {
				continue
			}
			target, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "virtfn"))
			if err != nil {
				continue
			}
			vf := filepath.Base(target)
			name := strings.NewReplacer(":", "-", ".", "-").Replace(vf)
			str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
			out[name] = vfDevice{pci: vf, device: resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				attrVendor:         str(p.vendor),
				attrDeviceID:       str(hexID(filepath.Join(pciDir, vf, "device"))),
				attrPFDeviceID:     str(p.device),
				attrPCIAddress:     str(vf),
				attrMultusDeviceID: str(vf),
				attrPFName:         str(p.netName),
				attrEswitchMode:    str("legacy"),
				attrVFID:           {IntValue: ptr.To(int64(id))},
				deviceattribute.StandardDeviceAttributePCIeRoot: str(p.root),
				attrPfPCIAddress:    str(p.addr),
				attrStandardPCIAddr: str(vf),
				attrLinkType:        str(p.link),
				attrRDMACapable:     {BoolValue: ptr.To(false)},
				attrNUMANode:        {IntValue: ptr.To(numa)},
			}}}
		}
	}
	return out, nil
}

// linkType is pkg/host/host.go@14490e9d438b GetLinkType: the netdev's
// /sys/class/net/<name>/type, ARPHRD_ETHER (1) "ethernet", ARPHRD_INFINIBAND
// (32) "infiniband", anything else, or nothing readable, "unknown".
func linkType(root, netName string) string {
	switch readTrim(filepath.Join(root, "class", "net", netName, "type")) {
	case "1":
		return "ethernet"
	case "32":
		return "infiniband"
	}
	return "unknown"
}

// hexID is a vendor or device file without its 0x, as ghw and
// GetVFList give them.
func hexID(path string) string { return strings.TrimPrefix(readTrim(path), "0x") }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func firstEntry(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return ""
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names[0]
}
