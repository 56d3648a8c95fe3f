package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Real is the machine's own kernel: /sys, /dev/vfio and its SR-IOV PFs (in
// the kernel tier's guest, QEMU's emulated igb NICs).
type Real struct {
	pfs []PF
}

// NewReal finds the SR-IOV PFs in /sys: functions with sriov_totalvfs > 0,
// bound to a driver, with one netdev in this netns.
func NewReal() (*Real, error) {
	sys := sriov.Sysfs{Root: "/sys"}
	ents, err := os.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		return nil, err
	}
	r := &Real{}
	for _, e := range ents {
		bdf := e.Name()
		if n, err := sys.ReadInt(bdf, "sriov_totalvfs"); err != nil || n == 0 {
			continue
		}
		if d, _ := sys.Driver(bdf); d == "" {
			continue
		}
		nets, err := os.ReadDir(sys.Attr(bdf, "net"))
		if err != nil || len(nets) != 1 {
			continue
		}
		r.pfs = append(r.pfs, PF{BDF: bdf, Name: nets[0].Name()})
	}
	sort.Slice(r.pfs, func(i, j int) bool { return r.pfs[i].BDF < r.pfs[j].BDF })
	if len(r.pfs) == 0 {
		return nil, errors.New("no SR-IOV PF with a driver and a netdev in /sys/bus/pci/devices")
	}
	return r, nil
}

func (*Real) Name() string { return "real" }

func (*Real) Where() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "?"
	}
	return strings.TrimRight(string(u.Release[:]), "\x00")
}

func (*Real) Sysfs() sriov.Sysfs { return sriov.Sysfs{Root: "/sys"} }
func (*Real) VFIODir() string    { return "/dev/vfio" }
func (r *Real) PFs() []PF        { return r.pfs }

// The VFIO ioctls: torvalds/linux include/uapi/linux/vfio.h@v6.1,
// _IO(VFIO_TYPE ';', VFIO_BASE 100 + n).
const (
	vfioGetAPIVersion     = 0x3b64
	vfioCheckExtension    = 0x3b65
	vfioSetIOMMU          = 0x3b66
	vfioGroupSetContainer = 0x3b68
	vfioGroupGetDeviceFD  = 0x3b6a

	vfioAPIVersion   = 0
	vfioType1IOMMU   = 1
	vfioType1v2IOMMU = 3
)

// realHold is a device held the way QEMU holds one: a container with the
// group attached and a type1 IOMMU set, and the device fd
// VFIO_GROUP_GET_DEVICE_FD returns (an anon inode, [vfio-device]).
type realHold struct {
	container, group, device int
}

// HoldDevice opens the container and the group, attaches the one to the
// other, sets the type1 IOMMU and takes the device's fd.
func (*Real) HoldDevice(group, bdf string) (DeviceHold, error) {
	h := &realHold{container: -1, group: -1, device: -1}
	fail := func(what string, err error) (DeviceHold, error) {
		_ = h.Close()
		return nil, fmt.Errorf("holding VFIO device %s (group %s): %s: %w", bdf, group, what, err)
	}
	var err error
	if h.container, err = unix.Open("/dev/vfio/vfio", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return fail("opening /dev/vfio/vfio", err)
	}
	if v, err := ioctl(h.container, vfioGetAPIVersion, 0); err != nil || v != vfioAPIVersion {
		return fail(fmt.Sprintf("VFIO_GET_API_VERSION %d", v), err)
	}
	iommu := uintptr(vfioType1v2IOMMU)
	if ok, _ := ioctl(h.container, vfioCheckExtension, iommu); ok != 1 {
		iommu = vfioType1IOMMU
	}
	if h.group, err = unix.Open(filepath.Join("/dev/vfio", group), unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return fail("opening the group", err)
	}
	cfd := int32(h.container)
	if _, err := ioctlPtr(h.group, vfioGroupSetContainer, unsafe.Pointer(&cfd)); err != nil {
		return fail("VFIO_GROUP_SET_CONTAINER", err)
	}
	if _, err := ioctl(h.container, vfioSetIOMMU, iommu); err != nil {
		return fail("VFIO_SET_IOMMU", err)
	}
	name, err := unix.BytePtrFromString(bdf)
	if err != nil {
		return fail("device name", err)
	}
	if h.device, err = ioctlPtr(h.group, vfioGroupGetDeviceFD, unsafe.Pointer(name)); err != nil {
		h.device = -1
		return fail("VFIO_GROUP_GET_DEVICE_FD", err)
	}
	return h, nil
}

func (h *realHold) CloseGroup() error {
	var errs []error
	for _, fd := range []*int{&h.group, &h.container} {
		if *fd >= 0 {
			errs = append(errs, unix.Close(*fd))
			*fd = -1
		}
	}
	return errors.Join(errs...)
}

func (h *realHold) Close() error {
	err := h.CloseGroup()
	if h.device >= 0 {
		err = errors.Join(err, unix.Close(h.device))
		h.device = -1
	}
	return err
}

func ioctl(fd int, cmd, arg uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, arg)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func ioctlPtr(fd int, cmd uintptr, p unsafe.Pointer) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, uintptr(p))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
