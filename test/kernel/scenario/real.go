package scenario

import (
	"errors"
	"fmt"
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

// DeviceRequests reads the kernel's log (/dev/kmsg, every record still in
// the ring) for vfio-pci's request line about bdf.
func (*Real) DeviceRequests(bdf string) (int, error) {
	// unix, not os: Go's poller would park a read of /dev/kmsg at its end
	// instead of returning EAGAIN.
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("opening /dev/kmsg: %w", err)
	}
	defer unix.Close(fd)
	return countRequests(func(buf []byte) (int, error) { return unix.Read(fd, buf) }, bdf)
}

// countRequests counts the request lines about bdf in the records read
// returns, one a read as /dev/kmsg gives them, until EAGAIN (the end).
// EPIPE is a record overwritten before it was read: skipped.
func countRequests(read func([]byte) (int, error), bdf string) (int, error) {
	want := bdf + ": " + deviceRequestLine
	buf := make([]byte, 8192)
	n := 0
	for {
		k, err := read(buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return n, nil
		case errors.Is(err, unix.EPIPE), errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return n, fmt.Errorf("reading /dev/kmsg: %w", err)
		case k == 0:
			return n, nil
		}
		if strings.Contains(string(buf[:k]), want) {
			n++
		}
	}
}
