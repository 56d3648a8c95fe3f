package scenario

import (
	"errors"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/vfiouser"
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

// HoldDevice takes the VFIO device as QEMU does (test/vfiouser): the
// device fd is an anon inode, [vfio-device].
func (*Real) HoldDevice(group, bdf string) (DeviceHold, error) {
	return vfiouser.HoldDevice("/dev/vfio", group, bdf)
}
