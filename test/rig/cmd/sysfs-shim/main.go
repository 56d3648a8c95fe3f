package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
)

// RealDir is where the real plugins are in the node.
const RealDir = "/usr/local/lib/sriov-lane-rig/cni"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sysfs-shim:", err)
		os.Exit(1)
	}
}

func run() error {
	// The mount namespace is the thread's until the exec makes the thread
	// the process.
	runtime.LockOSThread()
	plugin := filepath.Join(RealDir, filepath.Base(os.Args[0]))
	root, err := rigsysfs.FindIn([]string{rigsysfs.NodePath})
	if err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// Private first: the mount over /sys must not reach the node's own
	// mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount(root, "/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mounting %s over /sys: %w", root, err)
	}
	return unix.Exec(plugin, os.Args, os.Environ())
}
