package guest_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/fleet"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/kernel/guest"
)

// A fleet host's PF whose job pod died without its CNI DEL, on a real
// kernel. The PF goes into a netns pinned as the CRI pins a pod's, is
// renamed there to the pod's interface name with its host name in its
// alias, as the host-device plugin's ADD leaves it, and the job gives it
// VFs; then the pin goes with no DEL (the pod's node restarted). The
// kernel brings the PF back to the init netns, down, under the pod's name,
// its alias kept; `sriov-lane fleet pfs` says it is to return, and
// --return gives it its host name back and removes its VFs.
func TestFleetPFBackFromADeadPod(t *testing.T) {
	pf := igbPFs(t)[1]
	const podName = "net1"
	if _, err := netlink.LinkByName(podName); err == nil {
		t.Fatalf("%s is taken in the init netns: the PF would come back as devN", podName)
	}
	l, err := netlink.LinkByName(pf.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test left, the next test finds the PF as the guest
		// booted it: once the cleanups below let go of the pod's netns, the
		// kernel brings the PF back in a work item of its own.
		back := waitLinkBack(t, nil, pf.MAC)
		if back == nil {
			t.Errorf("the PF %s is not back in the init netns: the tests after this one will not find it", pf.MAC)
		}
		// The VFs go first, as fleet.Return does it: a VF's netdev may have
		// taken the PF's host name while the PF was away.
		_ = os.WriteFile(sys.Attr(pf.PCI, "sriov_numvfs"), []byte("0"), 0o644)
		if back != nil && back.Attrs().Name != pf.Name {
			_ = netlink.LinkSetDown(back)
			_ = netlink.LinkSetName(back, pf.Name)
			_ = netlink.LinkSetAlias(back, "")
		}
	})

	pin := filepath.Join(t.TempDir(), "cni-pod")
	ns := pinnedNetns(t, pin)
	closeNS := sync.OnceFunc(func() { ns.Close() })
	t.Cleanup(closeNS)
	if err := netlink.LinkSetNsFd(l, int(ns)); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns, netlinkRoute)
	if err != nil {
		t.Fatal(err)
	}
	in, err := h.LinkByName(pf.Name)
	if err == nil {
		err = h.LinkSetName(in, podName)
	}
	if err == nil {
		err = h.LinkSetAlias(in, pf.Name)
	}
	if err == nil {
		err = h.LinkSetUp(in)
	}
	h.Close()
	if err != nil {
		t.Fatalf("as host-device's ADD leaves it: %v", err)
	}
	if err := os.WriteFile(sys.Attr(pf.PCI, "sriov_numvfs"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The pod's netns dies: nothing holds it once the pin and our handle go.
	updates, done := make(chan netlink.LinkUpdate), make(chan struct{})
	defer close(done)
	if err := netlink.LinkSubscribe(updates, done); err != nil {
		t.Fatal(err)
	}
	closeNS()
	if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	back := waitLinkBack(t, updates, pf.MAC)
	if back == nil {
		t.Fatalf("the PF %s is not back in the init netns", pf.MAC)
	}
	a := back.Attrs()
	guest.Record(t, "fleet-pf-back", map[string]any{"name": a.Name, "alias": a.Alias, "up": a.Flags&net.FlagUp != 0})
	if a.Name != podName || a.Alias != pf.Name || a.Flags&net.FlagUp != 0 {
		t.Errorf("back in the init netns as %q (alias %q, flags %v), want %s, alias %s, down", a.Name, a.Alias, a.Flags, podName, pf.Name)
	}

	rep, err := fleet.PFs(sys, []string{pf.PCI})
	if err != nil {
		t.Fatal(err)
	}
	if rep[0].State != fleet.StateReturn || rep[0].Name != podName || rep[0].Alias != pf.Name || rep[0].NumVFs != 2 {
		t.Fatalf("fleet pfs: %+v", rep[0])
	}
	did, err := fleet.Return(t.Context(), sriov.Restorer{Sysfs: sys, VFIODir: "/dev/vfio", HolderWait: quietDownBound}, rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("return: %q", did)
	rep, err = fleet.PFs(sys, []string{pf.PCI})
	if err != nil {
		t.Fatal(err)
	}
	if rep[0].State != fleet.StateFree || rep[0].Name != pf.Name || rep[0].Alias != "" || rep[0].NumVFs != 0 {
		t.Errorf("after --return: %+v, want it free under %s", rep[0], pf.Name)
	}
}

// pinnedNetns makes a netns, bind-mounts it at path, as the CRI pins a
// pod's netns, and takes its thread back to the netns it came from: the
// mount and the handle returned hold it, and nothing else. (A thread left
// to die in it would not, were it the main thread: the runtime parks the
// main thread instead of ending it, and the netns lived on, its PF away,
// on 6.12 in the kernel tier.)
func pinnedNetns(t *testing.T, path string) netns.NsHandle {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return // the thread, unrestored, dies locked
		}
		err = unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
		if serr := netns.Set(orig); serr != nil {
			errc <- fmt.Errorf("back to the original netns: %w", serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitLinkBack waits, bounded, for the link with mac to show in the init
// netns (nil when it does not): the kernel tears a dead netns down in a
// work item of its own, after the last reference goes. It looks on each
// of updates, or each tick when there are none (a cleanup's) or netlink
// closed them on a receive error (ENOBUFS when they overflow the socket).
func waitLinkBack(t *testing.T, updates <-chan netlink.LinkUpdate, mac string) netlink.Link {
	t.Helper()
	if l := linkIn(t, nil, mac); l != nil {
		return l
	}
	timeout := time.After(bound.Scaled(time.Minute))
	var poll <-chan time.Time
	if updates == nil {
		poll = time.Tick(50 * time.Millisecond)
	}
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				updates = nil
				poll = time.Tick(50 * time.Millisecond)
				continue
			}
			if u.Attrs().HardwareAddr.String() == mac {
				if l := linkIn(t, nil, mac); l != nil {
					return l
				}
			}
		case <-poll:
			if l := linkIn(t, nil, mac); l != nil {
				return l
			}
		case <-timeout:
			return nil
		}
	}
}
