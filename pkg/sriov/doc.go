// Package sriov takes SR-IOV physical functions (PFs) from the host, hands
// them to node network namespaces, creates and binds their VFs, and gives
// every PF back exactly as it was found.
//
// Where things live (TestDocFileMap keeps this list true):
//   - discover.go:  which PFs exist (sysfs + netlink, matched by MAC), the
//     links of a netns
//   - emulated.go:  PFs a hypervisor emulates (QEMU's igb), what they lack
//   - select.go:    include/exclude rules
//   - lease.go:     cross-lane leases under the state dir
//   - pin.go:       an agent's netns pinned for the lane's life; where a
//     moved link is now (Locate)
//   - move.go:      PFs into a node's netns and back (rename on collision)
//   - placement.go: which PFs are placed where, read from the journal
//   - vfs.go:       sriov_numvfs, autoprobe, vfio-pci / kernel driver binding
//   - holders.go:   processes holding a VF through VFIO (group file, device
//     cdev, device fd), bounded waits for them
//   - target.go:    netns targets (pid, path, Docker container)
//   - netlinkhandle.go: netlink handles, for the route family only
//   - session.go:   one lane's use of the package, every change journalled
//   - undo.go:      journal undoers, so a fresh process can reverse a lane
//   - sysfs.go:     the one sysfs writer and the deadline waits
//
// Every host change is journalled (pkg/journal) before it is made.
// Work inside another netns goes through netlink handles bound to that
// netns, so no goroutine ever switches its thread's namespace.
package sriov
