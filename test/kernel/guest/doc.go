// Package guest holds the kernel tier's guest-side tests of the product:
// pkg/sriov's operations run as `up` and `down` run them, and the
// `sriov-lane check` and `plan` commands, against the real kernel's /sys
// with QEMU's emulated igb PFs, inside the guest test/kernel/vm boots
// (test/kernel/product_test.go builds this package's test binary and runs
// it there). Outside the guest every test skips: it needs the guest's
// kernel, PFs and VFIO, not the host's.
//
// The tests (in _test.go files) cover discovery, leases, vfio-pci and
// netdevice VFs with network namespaces as targets (a re-executed child
// in a new netns plays the agent, pinned by pkg/sriov's own pin code), a
// PF's VFs from before the lease coming back, and a VF held through VFIO
// (group file, or a device fd alone) making the undo fail in bound, naming
// its holder, and a re-run finish once it is gone; and a fleet host's PF
// the kernel brings back from a job pod's dead netns, which pkg/fleet
// reports and returns.
//
// Where things live (TestDocFileMap keeps this list true):
//   - guest.go:  the guest's environment (SRIOV_LANE_GUEST, the out
//     directory for facts), Main for the test binary's re-executed roles
//     and the child each runs as
//   - agent.go:  an "agent": a child in its own netns, and a Docker
//     stand-in that answers for it as for a container
//   - vfio.go:   a VFIO user holding a VF as QEMU does (container, type1
//     IOMMU, device fd), or by its device fd alone
package guest
