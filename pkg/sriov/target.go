package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/containerns"
)

// NetnsTarget is a network namespace to move links into. It is resolved at
// each use: a container's PID (and so its netns) changes when it restarts.
// Errors from Open do not name the target: callers do.
type NetnsTarget interface {
	Open(ctx context.Context) (netns.NsHandle, error)
	String() string
	// Spec is how the journal records the target, so a fresh process can
	// resolve it again.
	Spec() TargetSpec
}

// ErrTargetGone says the target's netns no longer exists (container
// removed or stopped, process exited, netns file deleted).
var ErrTargetGone = errors.New("target network namespace is gone")

// TargetSpec is the journalled form of a NetnsTarget.
type TargetSpec struct {
	Kind string `json:"kind"` // "pid", "path", "container" or "pinned"
	PID  int    `json:"pid,omitempty"`
	Path string `json:"path,omitempty"`
	ID   string `json:"id,omitempty"`
	// Name is the container's name, for people; ID is what is resolved.
	Name string `json:"name,omitempty"`
}

// PIDTarget is the netns of a process.
type PIDTarget int

func (p PIDTarget) Open(context.Context) (netns.NsHandle, error) {
	return openNetnsPath(fmt.Sprintf("/proc/%d/ns/net", int(p)))
}
func (p PIDTarget) String() string   { return "pid " + strconv.Itoa(int(p)) }
func (p PIDTarget) Spec() TargetSpec { return TargetSpec{Kind: "pid", PID: int(p)} }

// PathTarget is a netns file (/var/run/netns/NAME, /proc/PID/ns/net).
type PathTarget string

func (p PathTarget) Open(context.Context) (netns.NsHandle, error) { return openNetnsPath(string(p)) }
func (p PathTarget) String() string                               { return "netns " + string(p) }
func (p PathTarget) Spec() TargetSpec                             { return TargetSpec{Kind: "path", Path: string(p)} }

// ContainerTarget is the netns of a running Docker container, opened with
// its PID checked again (pkg/containerns).
type ContainerTarget struct {
	ID     string
	Name   string
	Docker containerns.Inspector
}

func (c ContainerTarget) Open(ctx context.Context) (netns.NsHandle, error) {
	h, err := containerns.Open(ctx, c.Docker, c.ID)
	if errors.Is(err, containerns.ErrNotRunning) {
		return -1, fmt.Errorf("%w: %w", ErrTargetGone, err)
	}
	return h, err
}
func (c ContainerTarget) String() string {
	if c.Name != "" {
		return c.Name
	}
	return "container " + c.ID
}
func (c ContainerTarget) Spec() TargetSpec {
	return TargetSpec{Kind: "container", ID: c.ID, Name: c.Name}
}

func openNetnsPath(path string) (netns.NsHandle, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return -1, fmt.Errorf("opening %s: %w", path, ErrTargetGone)
		}
		return -1, fmt.Errorf("opening netns %s: %w", path, err)
	}
	return h, nil
}

// Target turns a journalled spec back into a target.
func (d Restorer) Target(spec TargetSpec) (NetnsTarget, error) {
	switch spec.Kind {
	case "pid":
		return PIDTarget(spec.PID), nil
	case "path":
		return PathTarget(spec.Path), nil
	case "container":
		return ContainerTarget{ID: spec.ID, Name: spec.Name, Docker: d.Docker}, nil
	case "pinned":
		return PinnedTarget{Path: spec.Path, Name: spec.Name}, nil
	}
	return nil, fmt.Errorf("unknown netns target kind %q", spec.Kind)
}

// NetnsID identifies a network namespace by its nsfs inode.
type NetnsID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func (n NetnsID) String() string { return fmt.Sprintf("netns %d:%d", n.Dev, n.Ino) }

// bootIDFile names the running boot: a UUID the kernel makes once and keeps
// until the next boot (torvalds/linux Documentation/admin-guide/sysctl/kernel.rst,
// section "random", boot_id: "generated the first time this is retrieved,
// and unvarying after that"; read at commit 0b227076, which added it). A
// NetnsID means nothing in another boot: nsfs numbers namespaces as it
// makes them, and the netns a PF was taken from ended with its boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// readBootID returns the running boot's ID, or "" when the kernel does not
// say (then no record counts as made in an earlier boot).
func readBootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func netnsID(h netns.NsHandle) (NetnsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(h), &st); err != nil {
		return NetnsID{}, fmt.Errorf("identifying netns: %w", err)
	}
	return NetnsID{Dev: st.Dev, Ino: st.Ino}, nil
}

// currentNetns opens the calling thread's netns: the namespace the PF was
// found in, or must return to.
func currentNetns() (netns.NsHandle, NetnsID, error) {
	h, err := netns.Get()
	if err != nil {
		return -1, NetnsID{}, fmt.Errorf("opening current netns: %w", err)
	}
	id, err := netnsID(h)
	if err != nil {
		h.Close()
		return -1, NetnsID{}, err
	}
	return h, id, nil
}

// openTarget resolves t's netns now and opens a netlink handle in it; the
// caller closes both, and names t in an error. Errors from resolving are
// returned as they are, so ErrTargetGone can be told apart.
func openTarget(ctx context.Context, t NetnsTarget) (netns.NsHandle, *netlink.Handle, error) {
	tns, err := t.Open(ctx)
	if err != nil {
		return -1, nil, err
	}
	th, err := routeHandleAt(tns)
	if err != nil {
		tns.Close()
		return -1, nil, fmt.Errorf("opening netlink in its netns: %w", err)
	}
	return tns, th, nil
}
