// Package nsutil creates and deletes the named network namespaces the rig
// owns, without ever leaving a Go thread in the wrong namespace, and lists
// a netns's links as every test does (LinkList).
package nsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const netnsDir = "/var/run/netns"

// Exists reports whether the named netns is mounted.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

// Create makes the named netns unless it exists. The unshare happens on a
// thread that is locked and never unlocked, so the runtime discards it
// instead of reusing a thread left in the new namespace.
func Create(name string) error {
	if Exists(name) {
		return nil
	}
	if err := sharedNetnsDir(); err != nil {
		return fmt.Errorf("creating netns %s: %w", name, err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("creating netns %s: %w", name, err)
	}
	return nil
}

// Delete removes every link in the named netns (so veth pairs die at once
// rather than whenever the kernel's netns cleanup runs) and unmounts it.
// A missing netns is not an error.
func Delete(name string) error {
	if !Exists(name) {
		return nil
	}
	var errs []error
	if ns, err := netns.GetFromName(name); err == nil {
		if h, err := netlink.NewHandleAt(ns); err == nil {
			links, err := LinkList(h)
			if err != nil {
				errs = append(errs, fmt.Errorf("netns %s: %w", name, err))
			}
			for _, l := range links {
				if l.Attrs().Name == "lo" {
					continue
				}
				// ENODEV: it went on its own between the list and the delete,
				// as a veth does whose peer's netns (a removed container's)
				// the kernel is still cleaning up.
				if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
					errs = append(errs, fmt.Errorf("deleting %s in netns %s: %w", l.Attrs().Name, name, err))
				}
			}
			h.Close()
		}
		ns.Close()
	}
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("deleting netns %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// LinkList lists h's links (the current netns's when h is nil), again
// while the kernel interrupts the dump: netlink v1.3.1 returns a partial
// list with ErrDumpInterrupted when a link comes or goes during it, as
// links do around every test (a pod's netns torn down, a PF moved back).
// After ten interrupted dumps the error is returned, never a partial list.
// The product retries its own dumps the same way (pkg/sriov dump), which
// tests do not import.
func LinkList(h *netlink.Handle) ([]netlink.Link, error) {
	list := netlink.LinkList
	if h != nil {
		list = h.LinkList
	}
	var err error
	for range 10 {
		var links []netlink.Link
		if links, err = list(); err == nil {
			return links, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, fmt.Errorf("listing links: %w", err)
}

// sharedNetnsDir makes the netns directory a shared mount of its own, as
// iproute2's `ip netns add` does on first use. Without it, a later
// `ip netns add` by anyone stacks a bind mount over the directory and hides
// the netns mounted here before, which then can no longer be deleted.
func sharedNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point yet
		return fmt.Errorf("making %s shared: %w", netnsDir, err)
	}
	if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", netnsDir, err)
	}
	if err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s shared: %w", netnsDir, err)
	}
	return nil
}

// ForTest makes the named netns for a test and returns a handle to it; at
// the test's end the handle is closed and the netns deleted with every link
// in it (Delete). A netns of that name a killed run left is taken over. It
// lives here, not in test/testutil, because the stand-ins' own modules
// (test/standin/sriovcni, sriovdp) use it without testutil's Docker client.
func ForTest(t testing.TB, name string) netns.NsHandle {
	t.Helper()
	t.Cleanup(func() {
		if err := Delete(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("opening netns %s: %v", name, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// Path is where the named netns is mounted.
func Path(name string) string { return filepath.Join(netnsDir, name) }

// Do runs fn on an OS thread of its own in netns ns and returns fn's
// error. The thread is locked and never unlocked, so it ends with its
// goroutine and nothing else ever runs in ns by it; FUSE sees its thread
// id as the caller.
func Do(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Sent however the goroutine ends: fn may end it with
		// runtime.Goexit (a t.FailNow off the test's goroutine).
		err := errors.New("ended without returning (runtime.Goexit)")
		defer func() { errc <- err }()
		runtime.LockOSThread()
		if err = netns.Set(ns); err != nil {
			err = fmt.Errorf("entering netns: %w", err)
			return
		}
		err = fn()
	}()
	return <-errc
}
