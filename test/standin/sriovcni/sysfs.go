package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysfs reads, as pkg/utils/utils.go (k8snetworkplumbingwg/sriov-cni
// v2.10.0) does, but under p.sysfs instead of /sys. A net/ directory lists
// the netdevs of the reader's network namespace: these run in the node's
// netns, before anything enters the pod's.

// pfName is utils.GetPfName: the first entry of physfn/net.
func (p *plugin) pfName(vf string) (string, error) {
	dir := filepath.Join(p.sysfs, "bus", "pci", "devices", vf, "physfn", "net")
	if _, err := os.Lstat(dir); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(entries) < 1 {
		return "", fmt.Errorf("PF network device not found")
	}
	return strings.TrimSpace(entries[0].Name()), nil
}

// vfID is utils.GetVfid: the n < sriov_numvfs whose virtfn<n> under the
// PF's class/net entry points at addr.
func (p *plugin) vfID(addr, pf string) (int, error) {
	dev := filepath.Join(p.sysfs, "class", "net", pf, "device")
	b, err := os.ReadFile(filepath.Join(dev, "sriov_numvfs"))
	if err != nil {
		return 0, fmt.Errorf("failed to read the sriov_numfs of device %q: %v", pf, err)
	}
	total, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("failed to convert sriov_numfs(byte value) to int of device %q: %v", pf, err)
	}
	for n := 0; n < total; n++ {
		t, err := os.Readlink(filepath.Join(dev, "virtfn"+strconv.Itoa(n)))
		if err == nil && filepath.Base(t) == addr {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unable to get VF ID with PF: %s and VF pci address %v", pf, addr)
}

// vfLinkName is utils.GetVFLinkName: the first entry of the VF's net/.
func (p *plugin) vfLinkName(addr string) (string, error) {
	dir := filepath.Join(p.sysfs, "bus", "pci", "devices", addr, "net")
	if _, err := os.Lstat(dir); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("failed to read net dir of the device %s: %v", addr, err)
	}
	if len(entries) == 0 {
		return "", fmt.Errorf("VF device %s sysfs path (%s) has no entries", addr, dir)
	}
	return entries[0].Name(), nil
}

// userspaceDrivers are utils.UserspaceDrivers.
var userspaceDrivers = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

// hasDpdkDriver is utils.HasDpdkDriver: the driver link resolved, and its
// directory's name one of userspaceDrivers. The stand-in resolves it
// through the kernel (os.Stat) and takes the name from the link's last
// element, not with filepath.EvalSymlinks, which upstream uses: when the
// rig's sysfs is reached through /proc/1/root (run by the DRA driver's
// hostPID pod), resolving path components in user space follows that
// link out of the pod's view. On a kernel's sysfs the two agree.
func (p *plugin) hasDpdkDriver(addr string) (bool, error) {
	link := filepath.Join(p.sysfs, "bus", "pci", "devices", addr, "driver")
	if _, err := os.Stat(link); err != nil {
		return false, err
	}
	drv, err := os.Readlink(link)
	if err != nil {
		return false, err
	}
	for _, d := range userspaceDrivers {
		if filepath.Base(drv) == d {
			return true, nil
		}
	}
	return false, nil
}
