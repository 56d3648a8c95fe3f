// Package kernel is the kernel tier: what the rig's FUSE fake plays, run
// on real Debian kernels in a QEMU guest with emulated igb PFs (SR-IOV, 7
// VFs each). vm boots a guest (vm.Start) with guest-init (cmd/guest-init) as
// /init; TestKernels boots every kernel `make test-env`
// unpacked (bin/test-assets/kernels) twice, the guests at once, and runs
// every owner's guest programs in one of the two.
//
// The package has no code but this file (TestDocFileMap keeps it so); its
// tests, one file per owner:
//
//	kernels_test.go: TestKernels, two boots per kernel (the product's
//	  guest tests; the boot checks, then the scenario), each owner's
//	  check a subtest of its guest
//	boot_test.go: the guest sees the igb PFs and VFIO, and results, files
//	  and a nonzero exit come back (internal/bootcheck); a guest that
//	  crashes or hangs fails with its console (TestBootFailures, boots of
//	  its own)
//	product_test.go: test/kernel/guest's tests of pkg/sriov and of
//	  `sriov-lane check` and `plan` in the guest
//	scenario_test.go: the sysfs and netlink scenario (scenario/) on every
//	  kernel and on the rig's FUSE fake, transcripts compared step by step,
//	  with each difference left a named exception
package kernel
