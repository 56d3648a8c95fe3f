package sriov

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/containerns"
)

// DefaultHolderWait bounds how long an undo waits for the processes that
// hold a VF through VFIO to let go: a VM shut down as down starts closes
// its files within seconds; one still running never does, and the error
// then names it.
const DefaultHolderWait = 30 * time.Second

// holderPollInterval is how often the holders are listed again: each list
// walks every process's fds in /proc.
const holderPollInterval = 200 * time.Millisecond

// vfioDeviceFD is what /proc/PID/fd/N reads for a VFIO device fd:
// VFIO_GROUP_GET_DEVICE_FD hands out an anonymous inode named
// "[vfio-device]" (anon_inode_getfile in torvalds/linux
// drivers/vfio/vfio_main.c@v6.1; later kernels moved it to group.c), and a
// holder that closed its group and container fds leaves only this link
// (measured in test/kernel/guest on 6.1 and 6.12).
const vfioDeviceFD = "anon_inode:[vfio-device]"

// fdinfoSyspath starts the /proc/PID/fdinfo/N line in which a kernel
// names the device of a VFIO device fd. vfio_device_show_fdinfo came with
// v6.18 ("vfio: Add vfio-device-syspath to fdinfo", applied to the vfio
// tree for v6.18); before it vfio_device_fops has no show_fdinfo
// (torvalds/linux drivers/vfio/vfio_main.c at 037dd1308c), and
// test/kernel/guest finds the line absent on 6.1 and 6.12. There a device
// fd alone cannot be tied to a device.
const fdinfoSyspath = "vfio-device-syspath:"

// UnknownDeviceFD is how a holder is named whose only hold is a VFIO device
// fd the kernel does not tie to a device.
const UnknownDeviceFD = "a VFIO device fd (this kernel does not say which device)"

// Holder is a process holding a VF through VFIO: typically QEMU of a
// KubeVirt VM still running when the lane goes down.
type Holder struct {
	PID     int
	Command string
	// Container is the Docker container the process runs in, if any.
	Container string
	// Via is what it holds: the group file, the device cdev, a device fd.
	Via string
	// Unsure marks a device fd that the kernel does not tie to a device
	// (Via is UnknownDeviceFD): it may hold another device.
	Unsure bool
}

func (h Holder) String() string {
	s := fmt.Sprintf("pid %d (%s)", h.PID, h.Command)
	if h.Container != "" {
		s += " in " + h.Container
	}
	if h.Via != "" {
		s += " holding " + h.Via
	}
	return s
}

// ErrGroupHeld is returned (wrapped) when a VF is still held through VFIO
// after the wait.
var ErrGroupHeld = errors.New("VFIO group still in use")

// vfioGroup is the IOMMU group of a PCI device, "" when it has none.
func vfioGroup(sys Sysfs, bdf string) (string, error) {
	return sys.linked(bdf, "iommu_group", "the IOMMU group")
}

// vfioTarget is how a VF's VFIO files are recognised in another process's
// fd table: by what the files are (device number, or inode), never by
// path, since a process in a container sees them under its own /dev.
type vfioTarget struct {
	vf        string
	group     string
	groupFile string
	groupStat *syscall.Stat_t // nil: no group file
	// cdev is the VF's VFIO device cdev (/dev/vfio/devices/vfioN) on
	// kernels with CONFIG_VFIO_DEVICE_CDEV (6.6+, with iommufd); its
	// holder may never open the group file.
	cdev     string
	cdevRdev uint64
}

// target finds the VF's group file and device cdev; ok is false when the
// VF has neither (no IOMMU group: not bound to VFIO).
func (d Restorer) target(vf string) (vfioTarget, bool, error) {
	t := vfioTarget{vf: vf}
	group, err := vfioGroup(d.Sysfs, vf)
	if err != nil || group == "" {
		return t, false, err
	}
	t.group = group
	t.groupFile = filepath.Join(d.VFIODir, group)
	var st syscall.Stat_t
	switch err := syscall.Stat(t.groupFile, &st); {
	case err == nil:
		t.groupStat = &st
	case !errors.Is(err, os.ErrNotExist):
		return t, false, fmt.Errorf("stat %s: %w", t.groupFile, err)
	}
	// The cdev's number is read from sysfs, not from /dev: this process's
	// /dev may lack it (a container's does).
	if ents, err := os.ReadDir(d.Sysfs.Attr(vf, "vfio-dev")); err == nil {
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(d.Sysfs.Attr(vf, "vfio-dev"), e.Name(), "dev"))
			if err != nil {
				continue
			}
			var maj, min uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min); err == nil {
				t.cdev, t.cdevRdev = e.Name(), unix.Mkdev(maj, min)
			}
		}
	}
	return t, true, nil
}

func (t vfioTarget) String() string {
	s := "group " + t.group + " (" + t.groupFile + ")"
	if t.cdev != "" {
		s += ", cdev " + t.cdev
	}
	return s
}

func (d Restorer) procRoot() string {
	if d.ProcRoot != "" {
		return d.ProcRoot
	}
	return "/proc"
}

// waitVFIOFree waits until no process holds vf through VFIO.
//
// Unbinding a vfio-pci device (or removing it with sriov_numvfs=0) while a
// user holds it blocks the writer in the kernel until the user lets go,
// uninterruptibly once signalled: a down that wrote anyway would hang with
// no word on why. So nothing is written while a holder is known; after
// d.HolderWait the error names the VF, its files and its holders, and down
// can be run again once they are gone. A device fd that the kernel does
// not tie to a device does not hold the wait back (it may be another
// VF's, of another lane's VM): boundedVFIOWrite bounds the write it may
// block and names it then. A holder of the group file alone is waited for
// although the kernel does not block on it (test/kernel's scenario, 6.1
// and 6.12): every user that takes a device does so through its group,
// and before 6.18 its device fd cannot be tied to the device, so the group
// file is the one sure sign of the VM that holds this VF.
func (d Restorer) waitVFIOFree(ctx context.Context, vf string) error {
	if d.VFIODir == "" {
		return nil
	}
	t, ok, err := d.target(vf)
	if err != nil || !ok {
		return err
	}
	hold := d.HolderWait
	if hold <= 0 {
		hold = DefaultHolderWait
	}
	var holders []Holder
	var listErr error
	err = wait.PollUntilContextTimeout(ctx, holderPollInterval, hold, true, func(context.Context) (bool, error) {
		holders, listErr = scanHolders(ctx, d.procRoot(), t, d.Docker)
		holders = sure(holders)
		return listErr != nil || len(holders) == 0, nil
	})
	switch {
	case err == nil:
		return listErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("VF %s: %w: %s is held by %s; stop them (or the VMs they run) and run down again",
		vf, ErrGroupHeld, t, holderList(holders))
}

func sure(hs []Holder) []Holder {
	var out []Holder
	for _, h := range hs {
		if !h.Unsure {
			out = append(out, h)
		}
	}
	return out
}

func holderList(hs []Holder) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.String()
	}
	return strings.Join(names, ", ")
}

// scanHolders lists the processes under proc holding t: its group file,
// its device cdev, a device fd the kernel names as t's, or (Unsure) a
// device fd the kernel does not name. One Holder per process, the surest.
func scanHolders(ctx context.Context, proc string, t vfioTarget, docker containerns.Inspector) ([]Holder, error) {
	procs, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fdDir := filepath.Join(proc, p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to read
		}
		var h *Holder
		for _, fd := range fds {
			via, unsure, ok := holds(proc, p.Name(), fd.Name(), t)
			if !ok {
				continue
			}
			if h == nil || (h.Unsure && !unsure) {
				h = &Holder{PID: pid, Via: via, Unsure: unsure}
			}
			if !unsure {
				break
			}
		}
		if h == nil {
			continue
		}
		h.Command = procComm(proc, pid)
		if id := containerOf(proc, pid); id != "" {
			h.Container = id[:12]
			if docker != nil {
				if info, err := docker.ContainerInspect(ctx, id); err == nil {
					h.Container = strings.TrimPrefix(info.Name, "/")
				}
			}
		}
		out = append(out, *h)
	}
	return out, nil
}

// holds says whether fd of pid holds t, how, and whether that is sure.
func holds(proc, pid, fd string, t vfioTarget) (via string, unsure, ok bool) {
	path := filepath.Join(proc, pid, "fd", fd)
	if link, err := os.Readlink(path); err == nil && link == vfioDeviceFD {
		info, err := os.ReadFile(filepath.Join(proc, pid, "fdinfo", fd))
		if err != nil {
			return "", false, false // closed meanwhile
		}
		sys, named := fdinfoDevice(info)
		switch {
		case !named:
			return UnknownDeviceFD, true, true
		case filepath.Base(sys) == t.vf:
			return "a VFIO device fd of " + t.vf, false, true
		}
		return "", false, false
	}
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return "", false, false
	}
	if t.cdevRdev != 0 && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == t.cdevRdev {
		return "the VFIO device cdev " + t.cdev, false, true
	}
	if w := t.groupStat; w != nil {
		same := st.Dev == w.Dev && st.Ino == w.Ino
		if w.Mode&syscall.S_IFMT == syscall.S_IFCHR {
			same = st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == w.Rdev
		}
		if same {
			return "the group file " + t.groupFile, false, true
		}
	}
	return "", false, false
}

// fdinfoDevice returns the sysfs path a VFIO device fd's fdinfo names, if
// the kernel prints one.
func fdinfoDevice(info []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), fdinfoSyspath); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

func procComm(proc string, pid int) string {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// containerIDRE finds a Docker container ID in a cgroup path
// (.../docker/<id>, .../docker-<id>.scope).
var containerIDRE = regexp.MustCompile(`[0-9a-f]{64}`)

func containerOf(proc string, pid int) string {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	// The outermost container: a process in a k3d node's pod has the
	// node's ID first in its path.
	return containerIDRE.FindString(string(b))
}

// boundedVFIOWrite runs a sysfs write that the kernel blocks while one of
// vfs is held through VFIO (a holder can open it after waitVFIOFree
// looked, or hold only a device fd the kernel does not name). The write
// gets d.HolderWait; past that the error names the holders. The kernel
// keeps the write pending until they let go, and this process cannot take
// it back: a later down finds the VF already unbound or removed.
func (d Restorer) boundedVFIOWrite(ctx context.Context, vfs []string, write func() error) error {
	hold := d.HolderWait
	if hold <= 0 {
		hold = DefaultHolderWait
	}
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w (the write stays pending in the kernel)", ctx.Err())
	case <-time.After(hold):
	}
	var held, unsure []string
	seen := map[int]bool{}
	for _, vf := range vfs {
		t, ok, err := d.target(vf)
		if err != nil || !ok {
			continue
		}
		holders, _ := scanHolders(ctx, d.procRoot(), t, d.Docker)
		for _, h := range holders {
			switch {
			case !h.Unsure:
				held = append(held, fmt.Sprintf("VF %s (group %s) by %s", vf, t.group, h))
			case !seen[h.PID]:
				// The same unnamed fd matches every VF: name it once.
				seen[h.PID] = true
				unsure = append(unsure, h.String())
			}
		}
	}
	var who string
	switch {
	case len(held) > 0:
		who = "held: " + strings.Join(held, ", ")
		if len(unsure) > 0 {
			who += "; also " + strings.Join(unsure, ", ")
		}
	case len(unsure) > 0:
		who = "held, it seems, by " + strings.Join(unsure, ", ")
	default:
		who = "no holder found (it may have gone, or hold the VF from another PID namespace)"
	}
	return fmt.Errorf("%w: the kernel has blocked the write for %s; %s; it completes once they let go, then run down again", ErrGroupHeld, hold, who)
}
