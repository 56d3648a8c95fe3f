package sriov

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pollInterval is how often a wait re-checks its condition. Sysfs stores
// need no wait: the kernel applies them before write(2) returns, or fails
// the write with an errno (EBUSY, ERANGE, ENODEV...), and so does the
// test rig's fake sysfs. What does take time is asynchronous by nature:
// a VF netdev registered by its driver's deferred init, a lease freed.
// Both come in milliseconds, and a check is a few file reads.
const pollInterval = 10 * time.Millisecond

// vfNetdevWait bounds the wait for a probed VF's netdev: the driver's
// deferred init (iavf's init task) registers it within a second or two of
// the probe; a VF still without one after this never gets one.
const vfNetdevWait = 10 * time.Second

// Sysfs is a sysfs root: /sys on a host, a bind mount of the host's /sys in
// a CI pod, or a fake tree in tests.
type Sysfs struct{ Root string }

// Device is the directory of a PCI function.
func (s Sysfs) Device(bdf string) string {
	return filepath.Join(s.Root, "bus", "pci", "devices", bdf)
}

// Attr is the path of a PCI function's attribute.
func (s Sysfs) Attr(bdf, name string) string { return filepath.Join(s.Device(bdf), name) }

// DriverFile is the path of a PCI driver's control file (bind, unbind).
func (s Sysfs) DriverFile(driver, name string) string {
	return filepath.Join(s.Root, "bus", "pci", "drivers", driver, name)
}

// DriversProbe is the bus-wide probe control file.
func (s Sysfs) DriversProbe() string {
	return filepath.Join(s.Root, "bus", "pci", "drivers_probe")
}

// ReadAttr reads a PCI function's attribute, whitespace trimmed.
func (s Sysfs) ReadAttr(bdf, name string) (string, error) {
	b, err := os.ReadFile(s.Attr(bdf, name))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", s.Attr(bdf, name), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ReadInt reads an integer attribute.
func (s Sysfs) ReadInt(bdf, name string) (int, error) {
	v, err := s.ReadAttr(bdf, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", s.Attr(bdf, name), err)
	}
	return n, nil
}

// Driver returns the name of the driver bound to bdf, "" when unbound.
func (s Sysfs) Driver(bdf string) (string, error) {
	return s.linked(bdf, "driver", "driver")
}

// linked is the name bdf's link attr points at, "" when bdf has no such
// link: the kernel shows what a function belongs to (its driver, its IOMMU
// group) as a link, there only while it belongs to one. what names it in
// the error.
func (s Sysfs) linked(bdf, attr, what string) (string, error) {
	target, err := os.Readlink(s.Attr(bdf, attr))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s of %s: %w", what, bdf, err)
	}
	return filepath.Base(target), nil
}

// Exists reports whether the PCI function is present (VFs vanish when
// sriov_numvfs drops).
func (s Sysfs) Exists(bdf string) bool {
	_, err := os.Stat(s.Device(bdf))
	return err == nil
}

// WriteFile writes value and a newline to a sysfs attribute. It never
// creates the file: a missing attribute is an error on real sysfs and must be
// one here too, naming the attribute.
func WriteFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return nil
}
