package sriov

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Journal operations of moves.
const (
	OpRename = "sriov.rename"
	OpMove   = "sriov.move"
)

// MoveRecord is the journal data of OpMove: everything needed to bring the
// link back exactly as it was found, from any process.
type MoveRecord struct {
	// Function is which PCI function the link is, "PF" or "VF".
	Function string `json:"what"`
	PCI      string `json:"pci"`
	MAC      string `json:"mac"`
	// Name is the link's name where it was found; MovedAs its name while
	// in the target (different after a collision rename).
	Name    string  `json:"name"`
	MovedAs string  `json:"movedAs"`
	Origin  NetnsID `json:"origin"`
	// Boot is the boot Origin was identified in (readBootID); journals
	// written before it was recorded lack it.
	Boot string `json:"boot,omitempty"`
	MTU  int    `json:"mtu"`
	// LinkType tells a physical device (returns to init when its netns
	// dies) from a veth stand-in (destroyed with it).
	LinkType   string     `json:"linkType,omitempty"`
	AdminUp    bool       `json:"adminUp"`
	Target     TargetSpec `json:"target"`
	TargetDesc string     `json:"targetDesc"`
	// PF is the PF as discovery found it, for a PF's move (Placements);
	// journals written before it was recorded lack it.
	PF *PF `json:"pf,omitempty"`
}

func (r MoveRecord) label() string { return fmt.Sprintf("%s %s (%s)", r.Function, r.Name, r.PCI) }

// RenameRecord is the journal data of OpRename, made in the origin netns
// before a move whose name collides in the target.
type RenameRecord struct {
	PCI    string  `json:"pci"`
	MAC    string  `json:"mac"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Origin NetnsID `json:"origin"`
	Boot   string  `json:"boot,omitempty"` // as MoveRecord's
	// AdminUp is the state before the rename took the link down.
	AdminUp bool `json:"adminUp"`
}

// CollisionName is the deterministic name a link of PCI address pci takes
// when its own name is taken in the target.
func CollisionName(pci string) string {
	sum := sha256.Sum256([]byte(pci))
	return "sl" + hex.EncodeToString(sum[:])[:8]
}

// MovePF moves the PF from the caller's netns into the target and sets it
// up, renaming it first when its name is taken there. It returns the PF's
// name inside the target. Moving a PF that is already in the target is a
// no-op.
func (s *Session) MovePF(ctx context.Context, pf PF, t NetnsTarget) (string, error) {
	name, err := s.moveLink(ctx, "PF", pf.PCI, pf.MAC, t, &pf)
	if err != nil {
		return "", fmt.Errorf("moving %s into %s: %w", pf, t, err)
	}
	return name, nil
}

// moveLink moves the link with mac (of PCI function pci, function "PF" or "VF")
// into t and returns its name there; pf is the PF's discovery, recorded
// with a PF's move.
func (s *Session) moveLink(ctx context.Context, function, pci, mac string, t NetnsTarget, pf *PF) (string, error) {
	origin, oid, err := currentNetns()
	if err != nil {
		return "", err
	}
	defer origin.Close()
	oh, err := routeHandleAt(origin)
	if err != nil {
		return "", fmt.Errorf("netlink in current netns: %w", err)
	}
	defer oh.Close()
	tns, th, err := openTarget(ctx, t)
	if err != nil {
		return "", err
	}
	defer tns.Close()
	defer th.Close()

	link, err := linkByMAC(oh, mac)
	if err != nil {
		return "", err
	}
	if link == nil {
		if in, err := linkByMAC(th, mac); err == nil && in != nil {
			return in.Attrs().Name, nil
		}
		return "", fmt.Errorf("no link with MAC %s in the current netns", mac)
	}
	a := link.Attrs()
	boot := readBootID()
	rec := MoveRecord{Function: function, PCI: pci, MAC: mac, Name: a.Name, MovedAs: a.Name, Origin: oid, Boot: boot,
		MTU: a.MTU, AdminUp: a.Flags&net.FlagUp != 0, Target: t.Spec(), TargetDesc: t.String(), LinkType: link.Type(), PF: pf}
	if _, err := th.LinkByName(a.Name); err == nil {
		rec.MovedAs = CollisionName(pci)
		if _, err := th.LinkByName(rec.MovedAs); err == nil {
			return "", fmt.Errorf("both %s and %s are taken in %s", a.Name, rec.MovedAs, t)
		}
		if err := s.rename(oh, link, RenameRecord{PCI: pci, MAC: mac, From: a.Name, To: rec.MovedAs, Origin: oid, Boot: boot, AdminUp: rec.AdminUp}); err != nil {
			return "", err
		}
		s.warnf("%s %s (%s) renamed %s: %s already has a link named %s", function, a.Name, pci, rec.MovedAs, t, a.Name)
	}
	e, err := s.begin(OpMove, rec)
	if err != nil {
		return "", err
	}
	if err := oh.LinkSetNsFd(link, int(tns)); err != nil {
		return "", fmt.Errorf("moving: %w", err)
	}
	moved, err := linkByMAC(th, mac)
	if err != nil {
		return "", err
	}
	if moved == nil {
		return "", fmt.Errorf("link with MAC %s not found in %s after the move", mac, t)
	}
	if err := th.LinkSetUp(moved); err != nil {
		return "", fmt.Errorf("setting %s up in %s: %w", moved.Attrs().Name, t, err)
	}
	if err := s.done(e); err != nil {
		return "", err
	}
	return moved.Attrs().Name, nil
}

func (s *Session) rename(oh *netlink.Handle, link netlink.Link, rec RenameRecord) error {
	e, err := s.begin(OpRename, rec)
	if err != nil {
		return err
	}
	// Older kernels refuse to rename a running link; it goes down on the
	// move anyway and its admin state is restored on return.
	if err := oh.LinkSetDown(link); err != nil {
		return fmt.Errorf("setting %s down: %w", rec.From, err)
	}
	if err := oh.LinkSetName(link, rec.To); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", rec.From, rec.To, err)
	}
	return s.done(e)
}

// undoRename gives the link its name back if it is in the current netns
// under the collision name. Elsewhere, the move's undo restores the name.
func (d Restorer) undoRename(_ context.Context, rec RenameRecord) (string, error) {
	cur, oh, _, err := d.originHandle(rec.Origin, rec.Boot)
	if err != nil {
		return "", err
	}
	defer cur.Close()
	defer oh.Close()
	l, err := linkByMAC(oh, rec.MAC)
	if err != nil {
		return "", err
	}
	if l == nil {
		return fmt.Sprintf("link %s (%s) not in this netns; nothing to rename", rec.From, rec.PCI), nil
	}
	if l.Attrs().Name != rec.From {
		if err := setName(oh, l, rec.From); err != nil {
			return "", err
		}
	}
	// A kill between the rename and the move leaves the link down.
	if rec.AdminUp && l.Attrs().Flags&net.FlagUp == 0 {
		if err := oh.LinkSetUp(l); err != nil {
			return "", fmt.Errorf("setting %s up again: %w", rec.From, err)
		}
	}
	return "", nil
}

// originHandle opens the current netns after checking it is the one the
// record was made in (unless forced): returning a PF anywhere else is how
// NICs get lost when `down` runs from another pod or netns. A record made
// in an earlier boot (boot, when recorded, is not this one) names a netns
// that no longer exists: after a reboot a PF is back in the host's netns,
// so the current one is taken, and rebooted says so.
func (d Restorer) originHandle(origin NetnsID, boot string) (cur netns.NsHandle, h *netlink.Handle, rebooted bool, err error) {
	cur, cid, err := currentNetns()
	if err != nil {
		return -1, nil, false, err
	}
	now := d.BootID
	if now == "" {
		now = readBootID()
	}
	rebooted = boot != "" && now != "" && boot != now
	if cid != origin && !d.Force && !rebooted {
		cur.Close()
		return -1, nil, false, fmt.Errorf("running in %s but the PF was taken from %s: run from the original network namespace, or force to return it here", cid, origin)
	}
	h, err = routeHandleAt(cur)
	if err != nil {
		cur.Close()
		return -1, nil, false, fmt.Errorf("netlink in current netns: %w", err)
	}
	return cur, h, rebooted, nil
}

// returnLink brings a moved link back into the current netns and restores
// its name, MTU and admin state. It is idempotent and never fails because
// the link has vanished: that is reported in the note.
func (d Restorer) returnLink(ctx context.Context, rec MoveRecord) (string, error) {
	cur, oh, rebooted, err := d.originHandle(rec.Origin, rec.Boot)
	if err != nil {
		return "", fmt.Errorf("returning %s: %w", rec.label(), err)
	}
	defer cur.Close()
	defer oh.Close()
	var notes []string
	if rebooted {
		notes = append(notes, fmt.Sprintf("the host rebooted since %s was moved: returned to this netns", rec.label()))
	}
	l, err := linkByMAC(oh, rec.MAC)
	if err != nil {
		return "", err
	}
	if l == nil {
		note, err := d.fetchFromTarget(ctx, rec, cur, oh)
		if err != nil {
			return "", fmt.Errorf("returning %s from %s: %w", rec.label(), rec.TargetDesc, err)
		}
		if note != "" {
			notes = append(notes, note)
		}
		if l, err = linkByMAC(oh, rec.MAC); err != nil {
			return "", err
		}
	}
	// A physical device whose netns died is handed back to init by the
	// kernel's netns cleanup, which can lag: wait for it rather than mark it
	// returned while it is still in transit. Veth stand-ins die with the netns.
	if l == nil {
		var stepErr error
		err := wait.PollUntilContextTimeout(ctx, returnPollInterval, DefaultReturnWait, true, func(context.Context) (bool, error) {
			if stepErr = d.fetchFromInit(cur, rec.MAC); stepErr != nil {
				return true, nil
			}
			if l, stepErr = linkByMAC(oh, rec.MAC); stepErr != nil {
				return true, nil
			}
			return l != nil || rec.LinkType == "veth", nil
		})
		switch {
		case stepErr != nil:
			return "", fmt.Errorf("returning %s: %w", rec.label(), stepErr)
		case err != nil && ctx.Err() != nil:
			return "", fmt.Errorf("returning %s: waiting for it to reappear: %w", rec.label(), ctx.Err())
		}
		// DefaultReturnWait passed: l is still nil, which the note says.
	}
	if l == nil {
		notes = append(notes, fmt.Sprintf("%s %s (%s) not found: a physical %s returns to the init netns when its netns dies (may take minutes); a veth stand-in is destroyed",
			rec.Function, rec.Name, rec.PCI, rec.Function))
		return joinNotes(notes), nil
	}
	if rec.Function == "PF" && l.Attrs().Name != rec.Name {
		note, err := d.freeNameFromOwnVF(oh, rec)
		if err != nil {
			return "", fmt.Errorf("restoring %s: %w", rec.label(), err)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if err := restore(oh, l, rec); err != nil {
		return "", fmt.Errorf("restoring %s: %w", rec.label(), err)
	}
	return joinNotes(notes), nil
}

// freeNameFromOwnVF renames a netdev of one of the PF's own VFs that took
// the PF's name while the PF was away. The VFs a PF had before the lane
// are probed again (probeOriginalVFs) before the PF comes back, and the
// kernel names a new netdev with the first free ethN: on a real kernel the
// PF's own name, once it is in a node (measured in test/kernel/guest with
// igb/igbvf). The VF gets the next free name of the same pattern ("eth%d":
// the kernel picks, dev_change_name's %d). Any other link with the name
// is left alone: setName then says which.
func (d Restorer) freeNameFromOwnVF(h *netlink.Handle, rec MoveRecord) (string, error) {
	squat, err := h.LinkByName(rec.Name)
	if err != nil {
		return "", nil // the name is free
	}
	for _, vf := range d.Sysfs.ListVFs(rec.PCI) {
		_, names := netMACs(d.Sysfs, vf.PCI)
		if !slices.Contains(names, rec.Name) {
			continue
		}
		pattern := strings.TrimRight(rec.Name, "0123456789") + "%d"
		if err := h.LinkSetDown(squat); err != nil {
			return "", fmt.Errorf("setting VF %s's netdev %s down to rename it: %w", vf.PCI, rec.Name, err)
		}
		if err := h.LinkSetName(squat, pattern); err != nil {
			return "", fmt.Errorf("renaming VF %s's netdev %s (%s) out of the PF's name: %w", vf.PCI, rec.Name, pattern, err)
		}
		now := pattern
		if l, err := h.LinkByIndex(squat.Attrs().Index); err == nil {
			now = l.Attrs().Name
		}
		return fmt.Sprintf("VF %s's netdev had taken the name %s while the PF was away: renamed it %s", vf.PCI, rec.Name, now), nil
	}
	return "", nil
}

// fetchFromTarget moves the link from the target into cur if it is there.
func (d Restorer) fetchFromTarget(ctx context.Context, rec MoveRecord, cur netns.NsHandle, oh *netlink.Handle) (string, error) {
	t, err := d.Target(rec.Target)
	if err != nil {
		return "", err
	}
	tns, th, err := openTarget(ctx, t)
	if errors.Is(err, ErrTargetGone) {
		return fmt.Sprintf("%s is gone", t), nil
	}
	if err != nil {
		return "", err
	}
	defer tns.Close()
	defer th.Close()
	l, err := linkByMAC(th, rec.MAC)
	if err != nil || l == nil {
		return "", err
	}
	if other, err := oh.LinkByName(l.Attrs().Name); err == nil && other.Attrs().HardwareAddr.String() != rec.MAC {
		// Its name is taken here: rename inside the target first, the
		// final name is restored below.
		if err := setName(th, l, CollisionName(rec.PCI)); err != nil {
			return "", err
		}
	}
	if err := th.LinkSetNsFd(l, int(cur)); err != nil {
		return "", fmt.Errorf("moving back: %w", err)
	}
	return "", nil
}

// fetchFromInit looks for the link in the init netns of our PID namespace,
// where a physical device lands when its netns dies, and moves it to cur.
func (d Restorer) fetchFromInit(cur netns.NsHandle, mac string) error {
	ins, err := netns.GetFromPath("/proc/1/ns/net")
	if err != nil {
		return nil // cannot see init (unprivileged, other pid ns): nothing to look at
	}
	defer ins.Close()
	iid, err := netnsID(ins)
	if err != nil {
		return err
	}
	cid, err := netnsID(cur)
	if err != nil || iid == cid {
		return err
	}
	ih, err := routeHandleAt(ins)
	if err != nil {
		return nil
	}
	defer ih.Close()
	l, err := linkByMAC(ih, mac)
	if err != nil || l == nil {
		return err
	}
	if err := ih.LinkSetNsFd(l, int(cur)); err != nil {
		return fmt.Errorf("moving back from the init netns: %w", err)
	}
	return nil
}

func restore(h *netlink.Handle, l netlink.Link, rec MoveRecord) error {
	if l.Attrs().Name != rec.Name {
		if err := setName(h, l, rec.Name); err != nil {
			return err
		}
	}
	if l.Attrs().MTU != rec.MTU && rec.MTU > 0 {
		if err := h.LinkSetMTU(l, rec.MTU); err != nil {
			return fmt.Errorf("restoring MTU %d: %w", rec.MTU, err)
		}
	}
	if rec.AdminUp {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("setting up: %w", err)
		}
	} else if err := h.LinkSetDown(l); err != nil {
		return fmt.Errorf("setting down: %w", err)
	}
	return nil
}

// setName renames l, taking it down for the rename and back up after if it
// was up.
func setName(h *netlink.Handle, l netlink.Link, name string) error {
	if other, err := h.LinkByName(name); err == nil && other.Attrs().Index != l.Attrs().Index {
		return fmt.Errorf("cannot rename %s to %s: the name is taken by another link (index %d)", l.Attrs().Name, name, other.Attrs().Index)
	}
	up := l.Attrs().Flags&net.FlagUp != 0
	if up {
		if err := h.LinkSetDown(l); err != nil {
			return fmt.Errorf("setting %s down to rename it: %w", l.Attrs().Name, err)
		}
	}
	if err := h.LinkSetName(l, name); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", l.Attrs().Name, name, err)
	}
	if up {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("setting %s up after rename: %w", name, err)
		}
	}
	return nil
}

func joinNotes(notes []string) string {
	out := ""
	for i, n := range notes {
		if i > 0 {
			out += "; "
		}
		out += n
	}
	return out
}

// RenameToAlias gives the link name in the caller's netns the name its
// ifalias holds and clears the alias, leaving it down: what the
// host-device plugin's DEL does to a PF it moves out of a pod
// (containernetworking/plugins plugins/main/host-device/host-device.go@v1.9.1
// moveLinkOut), for a PF the kernel returned from a pod's netns instead.
func RenameToAlias(name string) (string, error) {
	h, l, err := ownLink(name)
	if err != nil {
		return "", err
	}
	defer h.Close()
	to := l.Attrs().Alias
	if to == "" || to == name {
		return name, nil
	}
	if err := h.LinkSetDown(l); err != nil {
		return "", fmt.Errorf("setting %s down: %w", name, err)
	}
	// Read again: setName sets a link that was up up again.
	if l, err = h.LinkByName(name); err != nil {
		return "", fmt.Errorf("link %s: %w", name, err)
	}
	if err := setName(h, l, to); err != nil {
		return "", err
	}
	if err := h.LinkSetAlias(l, ""); err != nil {
		return "", fmt.Errorf("clearing the alias of %s: %w", to, err)
	}
	return to, nil
}

// ownLink opens netlink in the caller's netns and finds the link name
// there; the caller closes the handle.
func ownLink(name string) (*netlink.Handle, netlink.Link, error) {
	h, err := routeHandle()
	if err != nil {
		return nil, nil, fmt.Errorf("opening netlink: %w", err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("link %s: %w", name, err)
	}
	return h, l, nil
}
