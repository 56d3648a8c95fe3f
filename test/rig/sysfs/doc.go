// Package sysfs is the stand-in for SR-IOV hardware on machines that have
// none: a fake kernel (Kernel) and the PCI sysfs it shows, laid out like the
// real /sys for SR-IOV NICs, served over FUSE to the rig and the tests that
// run nodes.
//
// Where things live (TestDocFileMap keeps this list true):
//   - kernel.go:    the PCI state and its stores, which behave like the
//     kernel's (synchronous, with its errnos, blocking while a VFIO device
//     is held, not a mere open group); PFs added after the start (AddPF);
//     the state persisted
//   - fuse.go:      Serve, the fake sysfs and /dev/vfio mounted with FUSE
//     and backed by a Kernel; the VFIO ioctls the fake answers
//   - fortest.go:   ServeForTest, Serve for a test
//   - netview.go:   class/net and net/ as the caller's netns shows them
//   - vfnetdev.go:  the VF netdevs made and removed in the peers' netns
//   - writetree.go: WriteTree, the same tree written to a plain directory
//     for unit tests with no root or FUSE
//   - layout.go:    the NICs it stands in for, PCI addresses and IOMMU
//     groups, and Tree, the paths of a mounted tree
package sysfs
