package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// The main goroutine keeps the main thread. The netns steps end netns
// by ending the one thread in them (a goroutine that exits locked to its
// thread ends the thread), but the runtime never ends the main thread: a
// locked goroutine that exits on it leaves it parked, still in the netns,
// which then never dies (a PF moved there never comes back). A locked main
// goroutine means no other goroutine ever runs on the main thread
// (runtime.LockOSThread: locked from an init function, main runs on the
// main thread). The package is for test binaries only.
//
//nolint:gochecknoinits // the lock must be taken before main runs, so main keeps the main thread.
func init() { runtime.LockOSThread() }

// pinnedNetns is a netns kept alive by a bind mount of its nsfs file, as
// `ip netns add` (and a node container's pinned netns) does.
type pinnedNetns struct {
	path string
	ns   netns.NsHandle
	h    *netlink.Handle
}

// newPinnedNetns makes a netns on a thread of its own, bind-mounts it at
// dir/name and lets the thread die: the mount alone keeps it.
func newPinnedNetns(dir, name string) (*pinnedNetns, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		errc <- unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("pinning a netns at %s: %w", path, err)
	}
	p := &pinnedNetns{path: path, ns: -1}
	var err error
	if p.ns, err = netns.GetFromPath(path); err != nil {
		p.Close()
		return nil, err
	}
	if p.h, err = netlink.NewHandleAt(p.ns, unix.NETLINK_ROUTE); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *pinnedNetns) Close() {
	if p.h != nil {
		p.h.Close()
	}
	if p.ns >= 0 {
		p.ns.Close()
	}
	_ = unix.Unmount(p.path, unix.MNT_DETACH)
	os.Remove(p.path)
}

// unpinnedNetns is a netns whose only reference is one thread: when that
// thread exits (the last process of a container dying), the netns goes.
type unpinnedNetns struct {
	fd   int // an nsfs fd for the move; closed before the thread exits
	exit chan struct{}
	done chan struct{}
}

func newUnpinnedNetns() (*unpinnedNetns, error) {
	u := &unpinnedNetns{fd: -1, exit: make(chan struct{}), done: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		defer close(u.done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		u.fd = fd
		errc <- nil
		<-u.exit
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	return u, nil
}

// die closes the last fd and ends the thread: nothing references the netns
// any more.
func (u *unpinnedNetns) die() {
	if u.fd >= 0 {
		unix.Close(u.fd)
		u.fd = -1
	}
	close(u.exit)
	<-u.done
}

var devN = regexp.MustCompile(`^dev[0-9]+$`)

// links lists the links of one netns the scenario knows, by label (only
// those labelled in only, when given); one whose name changed shows as
// label=devN (the kernel's fallback name) or label=renamed.
func (r *runner) links(h *netlink.Handle, only ...string) string {
	ls, err := nsutil.LinkList(h)
	if err != nil {
		return result(err)
	}
	var out []string
	for _, l := range ls {
		a := l.Attrs()
		lab, ok := r.label[a.Index]
		if !ok || len(only) > 0 && !slices.Contains(only, lab) {
			continue
		}
		switch {
		case a.Name == r.orig[a.Index]:
		case devN.MatchString(a.Name):
			lab += "=devN"
		default:
			lab += "=renamed"
		}
		out = append(out, lab)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// netnsSteps: a PF and a VF netdev into a pinned netns and back by name;
// a PF in an unpinned netns whose last task dies, with and without its
// name taken in the home netns meanwhile.
func (r *runner) netnsSteps(ctx context.Context) error {
	pf := r.pf0()
	if err := sriov.WriteFile(r.sys.Attr(pf, "sriov_drivers_autoprobe"), "1"); err != nil {
		return fmt.Errorf("autoprobe back on: %w", err)
	}
	r.numvfs("netns: numvfs 0 -> 1, autoprobe on", "1")
	vf0 := r.vf(pf, 0)
	var vfName string
	if names := r.vfNetdevs(vf0); len(names) == 1 {
		vfName = names[0]
		if l, err := r.h.LinkByName(vfName); err == nil {
			r.label[l.Attrs().Index] = "pf0.vf0.netdev"
			r.orig[l.Attrs().Index] = vfName
		}
	}
	p, err := newPinnedNetns(r.tmp, "pinned")
	if err != nil {
		return err
	}
	defer p.Close()
	netState := func() map[string]string {
		return map[string]string{"net.home": r.links(r.h), "net.pinned": r.links(p.h)}
	}
	move := func(name, what, link string, from *netlink.Handle, to netns.NsHandle) {
		l, err := from.LinkByName(link)
		if err == nil {
			err = from.LinkSetNsFd(l, int(to))
		}
		r.add(Step{Name: name, Op: "link-set-netns", Args: []string{what}, Result: result(err), State: netState()})
	}
	r.add(Step{Name: "netns: VF netdev in the home netns", Op: "observe", Result: yesNo(vfName != ""), State: netState()})
	move("netns: pf0 into the pinned netns", "pf0 -> pinned", r.pfs[0].Name, r.h, p.ns)
	move("netns: VF netdev into the pinned netns", "pf0.vf0.netdev -> pinned", vfName, r.h, p.ns)
	move("netns: pf0 back by name", "pf0 -> home", r.pfs[0].Name, p.h, r.home)
	move("netns: VF netdev back by name", "pf0.vf0.netdev -> home", vfName, p.h, r.home)
	r.numvfs("netns: numvfs 1 -> 0", "0")

	for i, clash := range []bool{false, true} {
		pfi := r.pfs[i]
		lab := fmt.Sprintf("pf%d", i)
		name := "unpinned netns dies: " + lab
		if clash {
			name += ", its name taken"
		}
		u, err := newUnpinnedNetns()
		if err != nil {
			return err
		}
		l, err := r.h.LinkByName(pfi.Name)
		ifindex := 0
		if err == nil {
			ifindex = l.Attrs().Index
			err = r.h.LinkSetNsFd(l, u.fd)
		}
		r.add(Step{Name: name + ": move", Op: "link-set-netns", Args: []string{lab + " -> unpinned"}, Result: result(err),
			State: map[string]string{"net.home": r.links(r.h, lab, "clash")}})
		if clash {
			// A link of the PF's name in the home netns: a veth pair.
			err := r.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pfi.Name}, PeerName: "clashpeer"})
			if c, lerr := r.h.LinkByName(pfi.Name); err == nil && lerr == nil {
				r.label[c.Attrs().Index] = "clash"
				r.orig[c.Attrs().Index] = pfi.Name
			}
			r.add(Step{Name: name + ": take its name", Op: "link-add", Args: []string{"veth named like " + lab}, Result: result(err),
				State: map[string]string{"net.home": r.links(r.h, lab, "clash")}})
		}
		// A canary veth with its other end in the netns about to die: the
		// kernel deletes it in the cleanup that moves the netns's physical
		// devices home, after the moves (net/core/dev.c
		// default_device_exit_batch: default_device_exit_net first, then
		// dellink of the devices with rtnl_link_ops; on 6.1 and 6.12
		// alike). Its end here vanishing ends the wait: by then a PF is
		// home or will never be (a veth stand-in is deleted with it).
		canary := fmt.Sprintf("canary%d", i)
		cerr := r.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: canary}, PeerName: "canarypeer", PeerNamespace: netlink.NsFd(u.fd)})
		cleaned := func() bool {
			_, err := r.h.LinkByName(canary)
			return cerr == nil && errors.As(err, &netlink.LinkNotFoundError{})
		}
		u.die()
		// Wait for the PF to come home, or for the netns's cleanup to end
		// without it (or for the bound).
		deadline := time.Now().Add(returnBound)
		back := "gone"
		for time.Now().Before(deadline) && ctx.Err() == nil {
			done := cleaned()
			if l, err := r.h.LinkByIndex(ifindex); err == nil && ifindex != 0 {
				back = "home"
				if l.Attrs().Name != pfi.Name {
					back = "home, renamed"
					if devN.MatchString(l.Attrs().Name) {
						back = "home as devN"
					}
				}
				break
			}
			if done {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if c, err := r.h.LinkByName(canary); err == nil {
			_ = r.h.LinkDel(c)
		}
		r.add(Step{Name: name + ": its last task exits", Op: "thread-exit", Args: []string{"unpinned netns"}, Result: back,
			State: map[string]string{"net.home": r.links(r.h, lab, "clash")}})
	}
	return nil
}
