package guest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/vfiouser"
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

// Holder is a process holding a VF through VFIO. Stop kills it and waits
// for it: the kernel releases the device as the process's files close.
type Holder struct {
	PID int
	// DeviceFD is the device fd's number in the holder.
	DeviceFD int
	child
}

// StartHolder starts a process holding the VF bdf of IOMMU group group in
// mode; it is stopped when t ends, if not before.
func StartHolder(t testing.TB, group, bdf string, mode HoldMode) *Holder {
	t.Helper()
	c := newChild(t, roleHolder, &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, "HOLD_GROUP="+group, "HOLD_DEVICE="+bdf, "HOLD_MODE="+string(mode))
	cmd := c.cmd
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{PID: cmd.Process.Pid, child: c}
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
	case <-time.After(bound.Scaled(WaitBound)):
		t.Fatalf("holder of %s (group %s, %s) not ready in %s", bdf, group, mode, bound.Scaled(WaitBound))
	}
	return h
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
	h, err := hold(os.Getenv("HOLD_GROUP"), os.Getenv("HOLD_DEVICE"), HoldMode(os.Getenv("HOLD_MODE")))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", h.DeviceFD())
	_, _ = io.Copy(io.Discard, os.Stdin)
	// The fds must stay open until the test lets go (closing stdin), not
	// until a finalizer finds h unreachable.
	runtime.KeepAlive(h)
	os.Exit(0)
}

// hold gets a device fd for bdf as QEMU does (test/vfiouser); in
// HoldDeviceFDOnly mode only that fd stays open.
func hold(group, bdf string, mode HoldMode) (*vfiouser.DeviceHold, error) {
	h, err := vfiouser.HoldDevice("/dev/vfio", group, bdf)
	if err != nil {
		return nil, err
	}
	if mode == HoldDeviceFDOnly {
		if err := h.CloseGroup(); err != nil {
			return nil, err
		}
	}
	return h, nil
}
