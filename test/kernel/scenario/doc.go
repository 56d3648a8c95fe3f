// Package scenario is the kernel tier's check of the rig's fake kernel:
// one scenario of the sysfs, VFIO and netlink operations the product
// performs, written once against Env, run on a real kernel in the tier's
// QEMU guest (Real) and on the rig's FUSE fake (Fake), each producing a
// Transcript; test/kernel's scenario_test.go compares them step by step,
// and every difference left is a named exception there.
//
// Where things live (TestDocFileMap keeps this list true):
//   - scenario.go:      Transcript, Env, Run, and the PCI steps: VF
//     creation and its errnos, autoprobe, driver_override, drivers_probe,
//     bind, unbind, and what blocks the removal of a vfio-pci VF
//   - netns.go:         the netns steps: pinned and unpinned namespaces, a
//     PF and a VF netdev moved into them and back
//   - real.go:          Real, the machine's kernel, and a VFIO device held
//     as QEMU holds it (container, type1 IOMMU, VFIO_GROUP_GET_DEVICE_FD)
//   - fake.go:          Fake, the rig's fake kernel served in a temp dir
//     with veth PFs, and RunFake, which runs it in a netns of its own
//   - compare.go:       Compare, the differences between two transcripts
//
// Its tests: TestGuestScenario is the guest's entry point (it runs only
// with SRIOV_LANE_GUEST=1 and writes $SRIOV_LANE_GUEST_OUT/scenario.json);
// TestScenarioFake runs the fake alone and checks it against the kernel
// facts of the field notes (section 2).
package scenario
