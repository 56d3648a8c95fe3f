package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsTarget is a network namespace to move links into. It is resolved at
// each use: a container's PID (and so its netns) changes when it restarts.
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

// ContainerInspector is the part of the Docker client a container target
// needs.
type ContainerInspector interface {
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
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

// ContainerTarget is the netns of a running Docker container.
type ContainerTarget struct {
	ID     string
	Name   string
	Docker ContainerInspector
}

func (c ContainerTarget) Open(ctx context.Context) (netns.NsHandle, error) {
	if c.Docker == nil {
		return -1, fmt.Errorf("resolving container %s: no Docker client", c.ID)
	}
	info, err := c.Docker.ContainerInspect(ctx, c.ID)
	if err != nil {
		if isNotFound(err) {
			return -1, fmt.Errorf("container %s: %w (%v)", c.ID, ErrTargetGone, err)
		}
		return -1, fmt.Errorf("inspecting container %s: %w", c.ID, err)
	}
	if info.State == nil || !info.State.Running || info.State.Pid == 0 {
		return -1, fmt.Errorf("container %s is not running: %w", c.ID, ErrTargetGone)
	}
	return openNetnsPath(fmt.Sprintf("/proc/%d/ns/net", info.State.Pid))
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

func isNotFound(err error) bool { return client.IsErrNotFound(err) }

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
func (d Deps) Target(spec TargetSpec) (NetnsTarget, error) {
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
// caller closes both. Errors from resolving are returned as they are, so
// ErrTargetGone can be told apart.
func openTarget(ctx context.Context, t NetnsTarget) (netns.NsHandle, *netlink.Handle, error) {
	tns, err := t.Open(ctx)
	if err != nil {
		return -1, nil, err
	}
	th, err := netlink.NewHandleAt(tns)
	if err != nil {
		tns.Close()
		return -1, nil, fmt.Errorf("netlink in %s: %w", t, err)
	}
	return tns, th, nil
}
