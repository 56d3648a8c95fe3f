package guest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The VFIO ioctls a user needs to get a device fd: _IO(VFIO_TYPE ';',
// VFIO_BASE 100 + n) and VFIO_TYPE1_IOMMU, from torvalds/linux
// include/uapi/linux/vfio.h@v6.1 (unchanged at v6.12).
const (
	vfioGetAPIVersion     = 0x3b64 // VFIO_GET_API_VERSION
	vfioSetIOMMU          = 0x3b66 // VFIO_SET_IOMMU
	vfioGroupSetContainer = 0x3b68 // VFIO_GROUP_SET_CONTAINER
	vfioGroupGetDeviceFD  = 0x3b6a // VFIO_GROUP_GET_DEVICE_FD
	vfioType1IOMMU        = 1      // VFIO_TYPE1_IOMMU
	vfioAPIVersion        = 0      // VFIO_API_VERSION
)

// HoldMode is how a holder holds its VF.
type HoldMode string

const (
	// HoldDevice keeps the container, group and device fds, as QEMU does.
	HoldDevice HoldMode = "device"
	// HoldDeviceFDOnly closes the group and container fds once it has the
	// device fd: its only trace is a /proc/PID/fd link to
	// anon_inode:[vfio-device], and the kernel still blocks removal.
	HoldDeviceFDOnly HoldMode = "device-fd-only"
)

// Holder is a process holding a VF through VFIO.
type Holder struct {
	PID int
	// DeviceFD is the device fd's number in the holder.
	DeviceFD int
	cmd      *exec.Cmd
	stdin    io.Closer
}

// StartHolder starts a process holding the VF bdf of IOMMU group group in
// mode; it is stopped when t ends, if not before.
func StartHolder(t testing.TB, group, bdf string, mode HoldMode) *Holder {
	t.Helper()
	cmd := exec.Command(self())
	cmd.Env = append(os.Environ(), roleEnv+"="+roleHolder, "HOLD_GROUP="+group, "HOLD_DEVICE="+bdf, "HOLD_MODE="+string(mode))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{PID: cmd.Process.Pid, cmd: cmd, stdin: stdin}
	t.Cleanup(h.Stop)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		fd, ok := strings.CutPrefix(s, "ready ")
		if !ok {
			t.Fatalf("holder of %s (group %s, %s): %q", bdf, group, mode, s)
		}
		h.DeviceFD, _ = strconv.Atoi(fd)
	case <-time.After(10 * time.Second):
		t.Fatalf("holder of %s (group %s, %s) not ready in 10s", bdf, group, mode)
	}
	return h
}

// Stop kills the holder and waits for it: the kernel releases the device
// as the process's files close.
func (h *Holder) Stop() {
	if h.cmd.ProcessState != nil {
		return
	}
	h.stdin.Close()
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// Comm is the holder's command name as /proc shows it.
func (h *Holder) Comm() string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.PID))
	return strings.TrimSpace(string(b))
}

// FDLinks lists where the holder's fds point.
func (h *Holder) FDLinks() []string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.PID))
	var out []string
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", h.PID), fd.Name())); err == nil {
			out = append(out, fd.Name()+" -> "+l)
		}
	}
	return out
}

func holderMain() {
	fd, err := hold(os.Getenv("HOLD_GROUP"), os.Getenv("HOLD_DEVICE"), HoldMode(os.Getenv("HOLD_MODE")))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", fd)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func ioctl(fd int, req uintptr, arg uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
	if errno != 0 {
		return int(r), errno
	}
	return int(r), nil
}

// hold gets a device fd for bdf as QEMU does: a container, the group set
// to it, the type1 IOMMU, then VFIO_GROUP_GET_DEVICE_FD.
func hold(group, bdf string, mode HoldMode) (int, error) {
	container, err := unix.Open("/dev/vfio/vfio", unix.O_RDWR, 0)
	if err != nil {
		return -1, fmt.Errorf("opening /dev/vfio/vfio: %w", err)
	}
	if v, err := ioctl(container, vfioGetAPIVersion, 0); err != nil || v != vfioAPIVersion {
		return -1, fmt.Errorf("VFIO_GET_API_VERSION = %d, %v", v, err)
	}
	g, err := unix.Open("/dev/vfio/"+group, unix.O_RDWR, 0)
	if err != nil {
		return -1, fmt.Errorf("opening /dev/vfio/%s: %w", group, err)
	}
	c := int32(container)
	if _, err := ioctl(g, vfioGroupSetContainer, uintptr(unsafe.Pointer(&c))); err != nil {
		return -1, fmt.Errorf("VFIO_GROUP_SET_CONTAINER: %w", err)
	}
	if _, err := ioctl(container, vfioSetIOMMU, vfioType1IOMMU); err != nil {
		return -1, fmt.Errorf("VFIO_SET_IOMMU type1: %w", err)
	}
	name, err := unix.BytePtrFromString(bdf)
	if err != nil {
		return -1, err
	}
	dev, err := ioctl(g, vfioGroupGetDeviceFD, uintptr(unsafe.Pointer(name)))
	if err != nil {
		return -1, fmt.Errorf("VFIO_GROUP_GET_DEVICE_FD %s: %w", bdf, err)
	}
	if mode == HoldDeviceFDOnly {
		unix.Close(g)
		unix.Close(container)
	}
	return dev, nil
}
