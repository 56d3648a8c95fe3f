// Package rigsysfs is how the stand-ins for node components (the SR-IOV
// device plugin, test/standin/sriovdp, and sriov-cni, test/standin/sriovcni)
// find the rig's fake sysfs. It is the stand-ins' own convention: no
// product code knows it.
//
// The real components read /sys, and the product mounts no /sys into their
// pods (upstream's DaemonSets do not either), so a stand-in in a pod sees
// its own /sys: the build machine's real PCI tree. The rig's lane config
// therefore also mounts the fake sysfs into every agent at NodePath, under
// /var/log, which the device plugin's pod has as a hostPath and which
// Multus's daemon pod sees as /hostroot/var/log (it runs delegate plugins
// chrooted into /hostroot, where it is NodePath again). The DRA driver's
// pod mounts neither, but shares the node's PID namespace (hostPID), so
// the node's root is its /proc/1/root; the plugins it runs from
// /opt/cni/bin (sriov) see the same. Search tries those places, then
// /sys, and takes the first with bus/pci/devices.
package rigsysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NodePath is where the rig's lane config mounts the fake sysfs in every
// agent (test/rig/laneconfig.go).
const NodePath = "/var/log/sriov-lane-rig/sys"

// Candidates are the places Find looks at, in order: the node path itself
// (the device plugin's pod, or a plugin chrooted into the node's root), the
// node's root mounted at /hostroot (Multus's daemon pod), the node's root
// through its PID 1 (the DRA driver's hostPID pod), then the real sysfs.
var Candidates = []string{NodePath, "/hostroot" + NodePath, "/proc/1/root" + NodePath, "/sys"}

// Find returns the first of Candidates that has bus/pci/devices.
func Find() (string, error) { return FindIn(Candidates) }

// FindIn returns the first of roots that has a bus/pci/devices directory.
func FindIn(roots []string) (string, error) {
	for _, r := range roots {
		if st, err := os.Stat(filepath.Join(r, "bus", "pci", "devices")); err == nil && st.IsDir() {
			return r, nil
		}
	}
	return "", fmt.Errorf("no sysfs with bus/pci/devices at %s", strings.Join(roots, ", "))
}
