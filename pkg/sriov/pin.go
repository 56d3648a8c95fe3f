package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
)

// OpPin journals a bind mount that pins an agent's network namespace.
//
// A container's netns dies with it (restart, crash, docker rm), and with it
// go the links the lane moved in: a physical PF returns to the host's
// init_net (not to a CI pod's netns), maybe minutes later and maybe renamed
// devN; a veth stand-in is destroyed. A bind mount of /proc/PID/ns/net keeps
// the netns, and everything in it, alive for the lane's life (the field
// notes' kernel facts; what `ip netns add` does), so down can always fetch
// PFs from it under their names. Moves target the pinned netns, not the
// container, and the pin is undone after every move out of it.
const OpPin = "sriov.pin"

// PinRecord is the journal data of OpPin.
type PinRecord struct {
	// Path is the pin: an empty file with the netns bind-mounted on it.
	Path string `json:"path"`
	// Container is the agent whose netns is pinned.
	Container     string  `json:"container"`
	ContainerName string  `json:"containerName"`
	Netns         NetnsID `json:"netns"`
}

// PinnedTarget is an agent's netns held by a pin: it outlives the
// container, so links moved into it stay reachable.
type PinnedTarget struct {
	Path string
	// Name is the agent's, for messages.
	Name string
}

func (p PinnedTarget) Open(context.Context) (netns.NsHandle, error) { return openNetnsPath(p.Path) }
func (p PinnedTarget) String() string                               { return p.Name }
func (p PinnedTarget) Spec() TargetSpec {
	return TargetSpec{Kind: "pinned", Path: p.Path, Name: p.Name}
}

// PinNetns pins the netns of the running container c at path (journalled
// first) and returns the pinned target. Pinning again what is already pinned
// at path is a no-op.
func (s *Session) PinNetns(ctx context.Context, c ContainerTarget, path string) (PinnedTarget, error) {
	t := PinnedTarget{Path: path, Name: c.String()}
	ns, err := c.Open(ctx)
	if err != nil {
		return t, fmt.Errorf("pinning the netns of %s: %w", c, err)
	}
	defer ns.Close()
	id, err := netnsID(ns)
	if err != nil {
		return t, err
	}
	if have, err := pinnedID(path); err == nil && have == id {
		return t, nil
	}
	e, err := s.begin(OpPin, PinRecord{Path: path, Container: c.ID, ContainerName: c.Name, Netns: id})
	if err != nil {
		return t, err
	}
	if err := pinAt(int(ns), path); err != nil {
		return t, fmt.Errorf("pinning the netns of %s at %s: %w", c, path, err)
	}
	return t, s.done(e)
}

// pinAt bind-mounts the netns open as fd onto a new empty file at path.
// /proc/self/fd/N names the nsfs inode itself, whatever process owns it.
func pinAt(fd int, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o400)
	if err != nil {
		return err
	}
	f.Close()
	src := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("bind-mounting %s: %w", src, err)
	}
	return nil
}

// pinnedID identifies the netns pinned at path; an error when nothing is.
func pinnedID(path string) (NetnsID, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return NetnsID{}, err
	}
	if st.Type != unix.NSFS_MAGIC {
		return NetnsID{}, fmt.Errorf("%s pins no netns", path)
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		return NetnsID{}, err
	}
	defer h.Close()
	return netnsID(h)
}

// ContainerNetns identifies the netns of a running container now; it
// returns ErrTargetGone when the container is not running.
func ContainerNetns(ctx context.Context, c ContainerTarget) (NetnsID, error) {
	h, err := c.Open(ctx)
	if err != nil {
		return NetnsID{}, err
	}
	defer h.Close()
	return netnsID(h)
}

// undoPin releases the pin; the netns then lives only as long as its
// container (if any). Moves out of it were undone before, newest first.
func undoPin(_ context.Context, rec PinRecord) (string, error) {
	for {
		err := unix.Unmount(rec.Path, unix.MNT_DETACH)
		if err == nil {
			continue // mounted more than once (a crash between retries): peel every layer
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // not a mount point (any more)
		}
		return "", fmt.Errorf("unpinning the netns of %s at %s: %w", rec.ContainerName, rec.Path, err)
	}
	if err := os.Remove(rec.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("removing pin %s: %w", rec.Path, err)
	}
	return "", nil
}

// Where says where a moved link is now, as seen from its agent.
type Where struct {
	// InAgent: the link is in the agent container's current netns.
	InAgent bool
	// InPin: the link is in the agent's pinned netns.
	InPin bool
	// AgentMoved: the container runs in another netns than the pinned one
	// (it restarted); AgentDown: it is not running (stopped or removed).
	AgentMoved, AgentDown bool
	// Name and State of the link where it was found.
	Name, State string
}

// Locate finds the link with mac from the agent's point of view: in the
// container's netns, else in its pinned netns.
func Locate(ctx context.Context, agent ContainerTarget, pin PinnedTarget, mac string) (Where, error) {
	var w Where
	cid, err := ContainerNetns(ctx, agent)
	switch {
	case errors.Is(err, ErrTargetGone):
		w.AgentDown = true
	case err != nil:
		return w, fmt.Errorf("%s: %w", agent, err)
	}
	pid, perr := pinnedID(pin.Path)
	if perr == nil && !w.AgentDown && pid != cid {
		w.AgentMoved = true
	}
	look := func(t NetnsTarget) (bool, error) {
		tns, th, err := openTarget(ctx, t)
		if errors.Is(err, ErrTargetGone) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", t, err)
		}
		defer tns.Close()
		defer th.Close()
		l, err := linkByMAC(th, mac)
		if err != nil || l == nil {
			return false, err
		}
		w.Name, w.State = l.Attrs().Name, l.Attrs().OperState.String()
		return true, nil
	}
	if !w.AgentDown {
		if w.InAgent, err = look(agent); err != nil || w.InAgent {
			return w, err
		}
	}
	if perr == nil {
		w.InPin, err = look(pin)
	}
	return w, err
}

// OfAgent reports whether e is one of the changes that put PFs into agent:
// its pin, the moves into its pinned netns (PFs and VF netdevs), and the
// renames, VF settings and binds of its PFs (pfs, by PCI address). Repair
// undoes exactly these, then redoes them into the agent's new netns.
func OfAgent(e *journal.Entry, agent string, pfs map[string]bool) bool {
	switch e.Op {
	case OpPin:
		var r PinRecord
		return e.Decode(&r) == nil && r.ContainerName == agent
	case OpMove:
		var r MoveRecord
		return e.Decode(&r) == nil && r.Target.Kind == "pinned" && r.Target.Name == agent
	case OpRename:
		var r RenameRecord
		return e.Decode(&r) == nil && pfs[r.PCI]
	case OpAutoprobe:
		var r AutoprobeRecord
		return e.Decode(&r) == nil && pfs[r.PCI]
	case OpNumVFs:
		var r NumVFsRecord
		return e.Decode(&r) == nil && pfs[r.PCI]
	case OpBind:
		var r BindRecord
		return e.Decode(&r) == nil && pfs[r.PF]
	}
	return false
}
