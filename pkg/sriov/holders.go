package sriov

import (
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

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/containerns"
)

// DefaultHolderWait bounds how long an undo waits for the processes that
// hold a VF's VFIO group open to let go: a VM shut down as down starts
// closes its group within seconds; one still running never does, and the
// error then names it.
const DefaultHolderWait = 30 * time.Second

// holderPollInterval is how often the holders are listed again: each list
// walks every process's fds in /proc.
const holderPollInterval = 200 * time.Millisecond

// Holder is a process with a VFIO group open: typically QEMU of a KubeVirt
// VM still running when the lane goes down.
type Holder struct {
	PID     int
	Command string
	// Container is the Docker container the process runs in, if any.
	Container string
}

func (h Holder) String() string {
	s := fmt.Sprintf("pid %d (%s)", h.PID, h.Command)
	if h.Container != "" {
		s += " in " + h.Container
	}
	return s
}

// ErrGroupHeld is returned (wrapped) when a VF's VFIO group is still open
// after the wait.
var ErrGroupHeld = errors.New("VFIO group still in use")

// vfioGroup is the IOMMU group of a PCI device, "" when it has none.
func vfioGroup(sys Sysfs, bdf string) (string, error) {
	target, err := os.Readlink(sys.Attr(bdf, "iommu_group"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the IOMMU group of %s: %w", bdf, err)
	}
	return filepath.Base(target), nil
}

// waitVFIOFree waits until no process holds the VFIO group of vf open.
//
// Unbinding a vfio-pci device (or removing it with sriov_numvfs=0) while its
// group is open blocks the writer in the kernel until the user closes it,
// uninterruptibly once signalled: a down that wrote anyway would hang with
// no word on why. So nothing is written while the group is held; after
// d.HolderWait the error names the VF, the group and its holders, and
// down can be run again once they are gone.
func (d Restorer) waitVFIOFree(ctx context.Context, vf string) error {
	if d.VFIODir == "" {
		return nil
	}
	group, err := vfioGroup(d.Sysfs, vf)
	if err != nil || group == "" {
		return err
	}
	dev := filepath.Join(d.VFIODir, group)
	hold := d.HolderWait
	if hold <= 0 {
		hold = DefaultHolderWait
	}
	var holders []Holder
	var listErr error
	err = wait.PollUntilContextTimeout(ctx, holderPollInterval, hold, true, func(context.Context) (bool, error) {
		holders, listErr = groupHolders(ctx, dev, d.Docker)
		return listErr != nil || len(holders) == 0, nil
	})
	switch {
	case err == nil:
		return listErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	names := make([]string, len(holders))
	for i, h := range holders {
		names[i] = h.String()
	}
	return fmt.Errorf("VF %s: %w: group %s (%s) is held by %s; stop them (or the VMs they run) and run down again",
		vf, ErrGroupHeld, group, dev, strings.Join(names, ", "))
}

// groupHolders lists the processes with dev open. Files are matched by
// what they are (device number, or inode), not by path: a process in a
// container sees the group under the container's own /dev.
func groupHolders(ctx context.Context, dev string, docker containerns.Inspector) ([]Holder, error) {
	var want syscall.Stat_t
	if err := syscall.Stat(dev, &want); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // no group file: nobody can hold it
		}
		return nil, fmt.Errorf("stat %s: %w", dev, err)
	}
	same := func(st *syscall.Stat_t) bool {
		if want.Mode&syscall.S_IFMT == syscall.S_IFCHR {
			return st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == want.Rdev
		}
		return st.Dev == want.Dev && st.Ino == want.Ino
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			var st syscall.Stat_t
			if syscall.Stat(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()), &st) != nil || !same(&st) {
				continue
			}
			h := Holder{PID: pid, Command: procComm(pid)}
			if id := containerOf(pid); id != "" {
				h.Container = id[:12]
				if docker != nil {
					if info, err := docker.ContainerInspect(ctx, id); err == nil {
						h.Container = strings.TrimPrefix(info.Name, "/")
					}
				}
			}
			out = append(out, h)
			break
		}
	}
	return out, nil
}

func procComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// containerIDRE finds a Docker container ID in a cgroup path
// (.../docker/<id>, .../docker-<id>.scope).
var containerIDRE = regexp.MustCompile(`[0-9a-f]{64}`)

func containerOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	// The outermost container: a process in a k3d node's pod has the
	// node's ID first in its path.
	return containerIDRE.FindString(string(b))
}

// boundedVFIOWrite runs a sysfs write that the kernel blocks while one of
// vfs is held through VFIO (a holder can open the group after
// waitVFIOFree looked). The write gets d.HolderWait; past that the error
// names the groups' holders. The kernel keeps the write pending until they
// let go, and this process cannot take it back: a later down finds the
// VF already unbound.
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
	var held []string
	for _, vf := range vfs {
		group, err := vfioGroup(d.Sysfs, vf)
		if err != nil || group == "" || d.VFIODir == "" {
			continue
		}
		holders, _ := groupHolders(ctx, filepath.Join(d.VFIODir, group), d.Docker)
		for _, h := range holders {
			held = append(held, fmt.Sprintf("VF %s (group %s) by %s", vf, group, h))
		}
	}
	who := "no holder found (it may have gone, or hold the group from another PID namespace)"
	if len(held) > 0 {
		who = "held: " + strings.Join(held, ", ")
	}
	return fmt.Errorf("%w: the kernel has blocked the write for %s; %s; it completes once they let go, then run down again", ErrGroupHeld, hold, who)
}
