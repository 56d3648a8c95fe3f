// Package vm boots the kernel tier's QEMU guest: a Debian kernel that
// `make test-env` unpacked, emulated igb PFs behind an emulated Intel
// IOMMU, and an initramfs of guest-init (test/kernel/cmd/guest-init), the
// modules and the programs to run; it returns what the programs printed,
// exited with and left in $SRIOV_LANE_GUEST_OUT.
//
// Where things live (TestDocFileMap keeps this list true):
//   - kernel.go: Kernel, Kernels (kernel.json under the test assets),
//     RequireKernels and the QEMU igb check
//   - vm.go:     Config, Start, the QEMU arguments (QEMUArgs), the
//     initramfs, the result stream's parser, BuildStatic
//   - hang.go:   hangReport, what QEMU's monitor says of a guest that
//     outlived its bound, before it is killed
//   - nudge.go:  nudge, the pause and resume of a guest silent with its
//     vCPU halted (a timer wake-up lost under TCG)
//   - cpio.go:   the cpio "newc" writer the initramfs is made with
//   - probe.go:  ProbeKVM, the boot make test-env tries once to choose
//     KVM or TCG for each kernel on this host (AccelFile)
package vm
