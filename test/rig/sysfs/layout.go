// Package sysfs is the stand-in for SR-IOV hardware on machines that have
// none: a fake PCI sysfs laid out like the real /sys for SR-IOV NICs.
//
// Serve (kernel.go, fuse.go) is the one the rig uses: a FUSE file system
// whose stores behave like the kernel's (synchronous, with its errnos,
// blocking on an open VFIO group) and whose class/net and net/ directories
// show the calling process's network namespace.
//
// Build and Emulator (this file, emulator.go, watch.go) are the older
// plain-file tree with an inotify emulator that applies writes after they
// return; only the stand-in node tests (test/standin) still use them.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Drivers the fake tree knows. Their id tables decide what `bind` accepts.
const (
	DriverPF   = "i40e"
	DriverVF   = "iavf"
	DriverVFIO = "vfio-pci"
)

// IDs written into the tree (Intel X710 PF and its VF).
const (
	VendorIntel = "0x8086"
	DevicePF    = "0x1572"
	DeviceVF    = "0x154c"
	ClassNet    = "0x020000"
	TotalVFs    = 8
)

// drivers lists every driver directory in the tree.
var drivers = []string{DriverPF, DriverVF, DriverVFIO}

// driverIDs is each driver's static id table; vfio-pci has none, so it
// only takes devices whose driver_override names it.
func driverIDs(driver string) []string {
	switch driver {
	case DriverPF:
		return []string{DevicePF}
	case DriverVF:
		return []string{DeviceVF}
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

func (t Tree) devicesDir() string          { return filepath.Join(t.Root, "devices", "pci0000:00") }
func (t Tree) DeviceDir(bdf string) string { return filepath.Join(t.devicesDir(), bdf) }
func (t Tree) driversDir() string          { return filepath.Join(t.Root, "bus", "pci", "drivers") }
func (t Tree) DriverDir(d string) string   { return filepath.Join(t.driversDir(), d) }
func (t Tree) busDevice(bdf string) string {
	return filepath.Join(t.Root, "bus", "pci", "devices", bdf)
}
func (t Tree) groupDir(n int) string {
	return filepath.Join(t.Root, "kernel", "iommu_groups", fmt.Sprint(n))
}
func (t Tree) DriversProbe() string { return filepath.Join(t.Root, "bus", "pci", "drivers_probe") }

// Build creates (or completes) the tree for the given PFs. Existing
// attribute values are kept, so building twice does not reset VF state.
func Build(root string, pfs []PF) error {
	t := Tree{Root: root}
	for _, dir := range []string{
		t.devicesDir(),
		filepath.Join(root, "bus", "pci", "devices"),
		filepath.Join(root, "class", "net"),
		filepath.Join(root, "kernel", "iommu_groups"),
		filepath.Join(root, "module", "vfio_pci"),
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating fake sysfs dir %s: %w", dir, err)
		}
	}
	for _, d := range drivers {
		if err := os.MkdirAll(t.DriverDir(d), 0o755); err != nil {
			return fmt.Errorf("creating driver dir %s: %w", d, err)
		}
		for _, f := range []string{"bind", "unbind"} {
			if err := ensureFile(filepath.Join(t.DriverDir(d), f), ""); err != nil {
				return err
			}
		}
	}
	if err := ensureFile(t.DriversProbe(), ""); err != nil {
		return err
	}
	for i, pf := range pfs {
		if err := t.buildPF(PFBDF(i), pf); err != nil {
			return fmt.Errorf("building fake PF %s (%s): %w", pf.Name, PFBDF(i), err)
		}
	}
	return nil
}

func (t Tree) buildPF(bdf string, pf PF) error {
	if err := t.addFunction(bdf, DevicePF, map[string]string{
		"sriov_totalvfs":          fmt.Sprint(TotalVFs),
		"sriov_numvfs":            "0",
		"sriov_drivers_autoprobe": "1",
	}); err != nil {
		return err
	}
	if err := t.bindLinks(bdf, DriverPF); err != nil {
		return err
	}
	if err := t.addNet(bdf, pf.Name, pf.MAC); err != nil {
		return err
	}
	return ensureSymlink(filepath.Join("..", "..", "devices", "pci0000:00", bdf, "net", pf.Name),
		filepath.Join(t.Root, "class", "net", pf.Name))
}

// addFunction creates a PCI function's directory with its common
// attributes, its IOMMU group and its bus/pci/devices entry.
func (t Tree) addFunction(bdf, device string, extra map[string]string) error {
	dir := t.DeviceDir(bdf)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating device dir: %w", err)
	}
	attrs := map[string]string{
		"vendor":          VendorIntel,
		"device":          device,
		"class":           ClassNet,
		"numa_node":       "0",
		"driver_override": "",
	}
	for k, v := range extra {
		attrs[k] = v
	}
	for k, v := range attrs {
		if err := ensureFile(filepath.Join(dir, k), v); err != nil {
			return err
		}
	}
	group, err := iommuGroup(bdf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(t.groupDir(group), "devices"), 0o755); err != nil {
		return fmt.Errorf("creating iommu group %d: %w", group, err)
	}
	if err := ensureSymlink(filepath.Join("..", "..", "..", "..", "devices", "pci0000:00", bdf),
		filepath.Join(t.groupDir(group), "devices", bdf)); err != nil {
		return err
	}
	if err := ensureSymlink(filepath.Join("..", "..", "..", "kernel", "iommu_groups", fmt.Sprint(group)),
		filepath.Join(dir, "iommu_group")); err != nil {
		return err
	}
	return ensureSymlink(filepath.Join("..", "..", "..", "devices", "pci0000:00", bdf), t.busDevice(bdf))
}

// removeFunction undoes addFunction.
func (t Tree) removeFunction(bdf string) error {
	group, err := iommuGroup(bdf)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range []string{t.busDevice(bdf), t.groupDir(group), t.DeviceDir(bdf)} {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// addNet records a netdev under the function, with a `device` link back
// like the real net/<if>/device.
func (t Tree) addNet(bdf, name, mac string) error {
	dir := filepath.Join(t.DeviceDir(bdf), "net", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating net dir %s: %w", name, err)
	}
	if err := writeAttr(filepath.Join(dir, "address"), strings.ToLower(mac), true); err != nil {
		return err
	}
	return ensureSymlink(filepath.Join("..", ".."), filepath.Join(dir, "device"))
}

// bindLinks creates the driver link and the driver's device link.
func (t Tree) bindLinks(bdf, driver string) error {
	// The device's driver link comes last: waiters poll it.
	if err := ensureSymlink(filepath.Join("..", "..", "..", "..", "devices", "pci0000:00", bdf),
		filepath.Join(t.DriverDir(driver), bdf)); err != nil {
		return err
	}
	return ensureSymlink(filepath.Join("..", "..", "..", "bus", "pci", "drivers", driver),
		filepath.Join(t.DeviceDir(bdf), "driver"))
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

// writeAttr writes value plus newline; create says whether a missing file
// may be created (the emulator may, product code may not).
func writeAttr(path, value string, create bool) error {
	flags := os.O_WRONLY | os.O_TRUNC
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// ensureFile creates an attribute file with value unless it exists.
func ensureFile(path, value string) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	if value == "" {
		// One-shot control files and unset attributes start empty.
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return fmt.Errorf("creating %s: %w", path, err)
		}
		return nil
	}
	return writeAttr(path, value, true)
}

// ensureSymlink creates link -> target, replacing a link pointing elsewhere.
func ensureSymlink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil {
		if cur == target {
			return nil
		}
		if err := os.Remove(link); err != nil {
			return fmt.Errorf("replacing link %s: %w", link, err)
		}
	}
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("linking %s -> %s: %w", link, target, err)
	}
	return nil
}
