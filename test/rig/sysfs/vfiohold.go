package sysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DeviceHold is a VFIO device held open through a fake /dev/vfio, the way
// QEMU holds a VF it passes through: container, group attached to it, type1
// IOMMU, VFIO_GROUP_GET_DEVICE_FD. While it is held, an unbind of the device
// from vfio-pci (or sriov_numvfs=0 on its PF) blocks, as on a real kernel.
// On the fake the device fd is a dup of the group fd (see Kernel, "VFIO").
type DeviceHold struct {
	container, group, device *os.File
}

// HoldDevice takes the device bdf of IOMMU group group through the fake
// /dev/vfio at vfioDir. Close lets it go; CloseGroup first closes the group
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
	if h.group, err = os.OpenFile(filepath.Join(vfioDir, group), os.O_RDWR, 0); err != nil {
		return fail("opening the group", err)
	}
	cfd := int32(h.container.Fd())
	if _, err := ioctlPtr(h.group, vfioGroupSetContainer, unsafe.Pointer(&cfd)); err != nil {
		return fail("VFIO_GROUP_SET_CONTAINER", err)
	}
	if _, err := ioctl(h.container, vfioSetIOMMU, vfioType1v2IOMMU); err != nil {
		return fail("VFIO_SET_IOMMU", err)
	}
	name, err := unix.BytePtrFromString(bdf)
	if err != nil {
		return fail("device name", err)
	}
	fd, err := ioctlPtr(h.group, vfioGroupGetDeviceFD, unsafe.Pointer(name))
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
