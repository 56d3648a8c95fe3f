package vfiouser

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The VFIO ioctls and values a user needs for a device fd, and the rig's
// fake answers: torvalds/linux include/uapi/linux/vfio.h@v6.1 (the same
// at v6.12), _IO(VFIO_TYPE ';', VFIO_BASE 100 + n).
const (
	GetAPIVersion       = 0x3b64 // VFIO_GET_API_VERSION
	CheckExtension      = 0x3b65 // VFIO_CHECK_EXTENSION
	SetIOMMU            = 0x3b66 // VFIO_SET_IOMMU
	GroupSetContainer   = 0x3b68 // VFIO_GROUP_SET_CONTAINER
	GroupUnsetContainer = 0x3b69 // VFIO_GROUP_UNSET_CONTAINER
	GroupGetDeviceFD    = 0x3b6a // VFIO_GROUP_GET_DEVICE_FD

	APIVersion   = 0 // VFIO_API_VERSION
	Type1IOMMU   = 1 // VFIO_TYPE1_IOMMU
	Type1v2IOMMU = 3 // VFIO_TYPE1v2_IOMMU
)

// DeviceHold is a VFIO device held open the way QEMU holds a VF it passes
// through: container, group attached to it, type1 IOMMU,
// VFIO_GROUP_GET_DEVICE_FD. While it is held, an unbind of the device from
// vfio-pci (or sriov_numvfs=0 on its PF) blocks. The same calls hold a VF
// on a real kernel (the kernel tier's guest) and on the rig's fake
// /dev/vfio, where the device fd is a dup of the group fd (test/rig/sysfs
// Kernel, "VFIO").
type DeviceHold struct {
	container, group, device *os.File
}

// HoldDevice takes the device bdf of IOMMU group group through the
// /dev/vfio at vfioDir (the real one, or the rig's fake). Close lets it go; CloseGroup first closes the group
// and container fds and keeps only the device, the state a VFIO user can
// leave itself in.
func HoldDevice(vfioDir, group, bdf string) (*DeviceHold, error) {
	h := &DeviceHold{}
	var err error
	if h.container, err = os.OpenFile(filepath.Join(vfioDir, "vfio"), os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("opening the VFIO container: %w", err)
	}
	fail := func(what string, err error) (*DeviceHold, error) {
		_ = h.Close()
		return nil, fmt.Errorf("holding VFIO device %s (group %s): %s: %w", bdf, group, what, err)
	}
	if v, err := ioctl(h.container, GetAPIVersion, 0); err != nil || v != APIVersion {
		return fail(fmt.Sprintf("VFIO_GET_API_VERSION %d", v), err)
	}
	// type1v2 where the container has it (every kernel since 3.18), as
	// QEMU prefers it; else type1.
	iommu := uintptr(Type1v2IOMMU)
	if ok, _ := ioctl(h.container, CheckExtension, iommu); ok != 1 {
		iommu = Type1IOMMU
	}
	if h.group, err = os.OpenFile(filepath.Join(vfioDir, group), os.O_RDWR, 0); err != nil {
		return fail("opening the group", err)
	}
	cfd := int32(h.container.Fd())
	if _, err := ioctlPtr(h.group, GroupSetContainer, unsafe.Pointer(&cfd)); err != nil {
		return fail("VFIO_GROUP_SET_CONTAINER", err)
	}
	if _, err := ioctl(h.container, SetIOMMU, iommu); err != nil {
		return fail("VFIO_SET_IOMMU", err)
	}
	name, err := unix.BytePtrFromString(bdf)
	if err != nil {
		return fail("device name", err)
	}
	fd, err := ioctlPtr(h.group, GroupGetDeviceFD, unsafe.Pointer(name))
	if err != nil {
		return fail("VFIO_GROUP_GET_DEVICE_FD", err)
	}
	if fd != 0 {
		// A real kernel: keep the fd it made.
		h.device = os.NewFile(uintptr(fd), "vfio-device:"+bdf)
		return h, nil
	}
	// The fake: the open group file holds the device until its last close.
	dup, err := unix.Dup(int(h.group.Fd()))
	if err != nil {
		return fail("dup of the group fd", err)
	}
	h.device = os.NewFile(uintptr(dup), "vfio-device:"+bdf)
	return h, nil
}

// DeviceFD is the number of the device fd in this process.
func (h *DeviceHold) DeviceFD() int {
	if h.device == nil {
		return -1
	}
	return int(h.device.Fd())
}

// CloseGroup closes the group and container fds; the device stays held.
func (h *DeviceHold) CloseGroup() error {
	var errs []error
	for _, f := range []**os.File{&h.group, &h.container} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	return errors.Join(errs...)
}

// Close lets the device go (and closes whatever else is still open).
func (h *DeviceHold) Close() error {
	err := h.CloseGroup()
	if h.device != nil {
		err = errors.Join(err, h.device.Close())
		h.device = nil
	}
	return err
}

// ioctl issues cmd on f with a plain argument, returning its result.
func ioctl(f *os.File, cmd, arg uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), cmd, arg)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// ioctlPtr issues cmd on f with a pointer argument.
func ioctlPtr(f *os.File, cmd uintptr, p unsafe.Pointer) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), cmd, uintptr(p))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
