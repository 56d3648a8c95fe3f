// Package kernel is the kernel tier: what the rig's FUSE fake plays, run
// on real Debian kernels in a QEMU guest with emulated igb PFs (SR-IOV, 7
// VFs each). vm boots a guest (vm.Start) with guest-init (cmd/guest-init) as
// /init; each owner's host test here boots every kernel `make test-env`
// unpacked (bin/test-assets/kernels) and runs its guest programs.
//
// The package has no code but this file (TestDocFileMap keeps it so); its
// tests, one file per owner:
//
//	boot_test.go: every kernel boots; the guest sees the igb PFs and VFIO,
//	  and results, files and a nonzero exit come back (internal/bootcheck)
//	scenario_test.go: the sysfs and netlink scenario (scenario/) on every
//	  kernel and on the rig's FUSE fake, transcripts compared step by step,
//	  with each difference left a named exception
package kernel
