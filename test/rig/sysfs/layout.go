package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DriverVFIO is the driver that takes a function only through its
// driver_override: its id table is empty.
const DriverVFIO = "vfio-pci"

// IDs common to every NIC the fake tree stands in for.
const (
	VendorIntel = "0x8086"
	ClassNet    = "0x020000"
)

// NIC is the hardware a fake kernel stands in for: the PCI device ids of
// its PF and VFs, the kernel drivers whose id tables match them (and so
// bind them on a probe), and the sriov_totalvfs its PF driver sets. The
// product must not care which one it is: it reads the drivers from sysfs.
type NIC struct {
	Model    string
	Vendor   string
	PFDevice string
	VFDevice string
	PFDriver string
	VFDriver string
	TotalVFs int
}

// The NICs the fake kernel knows. Their ids are the drivers' own, read in
// the Linux tree (the store holds single commits of it, not tags; these
// ids have not changed in years):
//
//   - X710: torvalds/linux drivers/net/ethernet/intel/i40e/i40e_devids.h@bc69b75
//     I40E_DEV_ID_SFP_XL710 0x1572 (i40e); drivers/net/ethernet/intel/iavf/iavf_devids.h@fc4b04d
//     IAVF_DEV_ID_VF 0x154C (iavf). TotalVFs 8 is the rig's, not the
//     card's (up to 64 a PF): VF functions are 0..7 of one fake device.
//   - 82576, the NIC of QEMU's emulated igb: torvalds/linux
//     drivers/net/ethernet/intel/igb/e1000_hw.h@d44e7a9 E1000_DEV_ID_82576
//     0x10C9, in igb_pci_tbl (igb/igb_main.c@6f23fc4), whose
//     igb_probe_vfs sets pci_sriov_set_totalvfs(pdev, 7);
//     drivers/net/ethernet/intel/igbvf/vf.h@0b77b97 E1000_DEV_ID_82576_VF
//     0x10CA, in igbvf_pci_tbl (igbvf/netdev.c@009f773). A real kernel
//     (6.1 and 6.12, QEMU's igb) showed sriov_totalvfs 7 and bound the VFs
//     to igbvf (field notes section 3).
var (
	X710 = NIC{Model: "Intel X710", Vendor: VendorIntel, PFDevice: "0x1572", VFDevice: "0x154c",
		PFDriver: "i40e", VFDriver: "iavf", TotalVFs: 8}
	I82576 = NIC{Model: "Intel 82576", Vendor: VendorIntel, PFDevice: "0x10c9", VFDevice: "0x10ca",
		PFDriver: "igb", VFDriver: "igbvf", TotalVFs: 7}
)

// NICs lists the known NICs, the default (X710) first.
var NICs = []NIC{X710, I82576}

// NICForVFDriver is the NIC whose VFs the kernel binds to vfDriver; ""
// is the default, X710 with iavf.
func NICForVFDriver(vfDriver string) (NIC, error) {
	if vfDriver == "" {
		return NICs[0], nil
	}
	var known []string
	for _, n := range NICs {
		if n.VFDriver == vfDriver {
			return n, nil
		}
		known = append(known, fmt.Sprintf("%s (%s)", n.VFDriver, n.Model))
	}
	return NIC{}, fmt.Errorf("the fake kernel knows no NIC whose VFs take driver %q; known: %s", vfDriver, strings.Join(known, ", "))
}

// drivers lists every driver directory the kernel has for n.
func (n NIC) drivers() []string { return []string{n.PFDriver, n.VFDriver, DriverVFIO} }

// knows reports whether d is one of n's drivers.
func (n NIC) knows(d string) bool {
	for _, x := range n.drivers() {
		if x == d {
			return true
		}
	}
	return false
}

// netDriver reports whether d registers a netdev for the function it binds.
func (n NIC) netDriver(d string) bool { return d == n.PFDriver || d == n.VFDriver }

// driverIDs is each driver's static id table; vfio-pci has none, so it
// only takes devices whose driver_override names it.
func (n NIC) driverIDs(driver string) []string {
	switch driver {
	case n.PFDriver:
		return []string{n.PFDevice}
	case n.VFDriver:
		return []string{n.VFDevice}
	}
	return nil
}

// PF is one stand-in physical function: its netdev name and MAC.
type PF struct {
	Name string
	MAC  string
}

// PFBDF is the PCI address of PF i.
func PFBDF(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x40+i) }

// VFBDF is the PCI address of VF j of the PF at pfBDF (same bus, device 0x10).
func VFBDF(pfBDF string, j int) string {
	return fmt.Sprintf("%s:10.%d", pfBDF[:len("0000:40")], j)
}

// iommuGroup gives every function its own group: bus*16 + 0 for the PF,
// 1+function for VFs, so groups never collide within one tree.
func iommuGroup(bdf string) (int, error) {
	var dom, bus, dev, fn int
	if _, err := fmt.Sscanf(bdf, "%04x:%02x:%02x.%d", &dom, &bus, &dev, &fn); err != nil {
		return 0, fmt.Errorf("parsing PCI address %q: %w", bdf, err)
	}
	if dev == 0 {
		return bus * 16, nil
	}
	return bus*16 + 1 + fn, nil
}

// Tree holds the paths of one fake sysfs root.
type Tree struct{ Root string }

// DeviceDir is the function's directory under devices/.
func (t Tree) DeviceDir(bdf string) string {
	return filepath.Join(t.Root, "devices", "pci0000:00", bdf)
}

// Driver returns the basename of the function's driver link, "" if unbound.
func (t Tree) Driver(bdf string) string {
	target, err := os.Readlink(filepath.Join(t.DeviceDir(bdf), "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// ReadAttr reads an attribute with surrounding whitespace trimmed.
func ReadAttr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
