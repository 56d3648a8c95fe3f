// Package vfiodev makes the stand-in VFIO device nodes that the device
// plugin (test/standin/sriovdp) and the DRA driver (test/standin/drasriov)
// hand to pods. The rig has no VFIO character devices (its /dev/vfio holds
// regular files its FUSE kernel serves), and the container runtime refuses
// a device whose host path is not a device node, so both stand-ins give
// pods upstream's container paths (/dev/vfio/vfio, /dev/vfio/<group>) over
// host nodes made here: character devices with /dev/null's numbers, so
// that opening one in the pod opens /dev/null. Upstream's host paths are
// the real /dev/vfio/vfio and /dev/vfio/<group> (noiommu-<group> without
// an IOMMU): k8snetworkplumbingwg/sriov-network-device-plugin
// pkg/infoprovider/vfioInfoProvider.go and pkg/utils/utils.go
// GetVFIODeviceFile@v3.11.0, and dra-driver-sriov
// pkg/devicestate/state.go@14490e9d438b applyConfigOnDevice.
package vfiodev

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Node makes sure dir/name is a character device with the numbers of
// devNull (a character device, /dev/null outside tests) and returns its
// path. It is checked on every call, not once: nothing else keeps it, and
// a node that became anything else is made again, atomically (a pod being
// set up at the same time sees the old node or the new one).
func Node(dir, devNull, name string) (string, error) {
	p := filepath.Join(dir, name)
	var null unix.Stat_t
	if err := unix.Stat(devNull, &null); err != nil || null.Mode&unix.S_IFMT != unix.S_IFCHR {
		return "", fmt.Errorf("stand-in VFIO device %s: %s is not a character device (%v)", p, devNull, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == null.Rdev {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("stand-in VFIO device: %w", err)
	}
	tmp := p + ".tmp"
	_ = os.Remove(tmp)
	if err := unix.Mknod(tmp, unix.S_IFCHR|0o666, int(null.Rdev)); err != nil {
		return "", fmt.Errorf("stand-in VFIO device: mknod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("stand-in VFIO device: %w", err)
	}
	return p, nil
}
