// Package bootcheck is the guest side of test/kernel's boot test: its test
// binary runs in the QEMU guest and checks what the tier stands on (igb
// PFs with SR-IOV, vfio-pci's /dev/vfio/vfio) and that a file and a
// failure come back to the host (bootcheck_test.go). Outside the guest
// its tests skip.
//
// The package has no code but this file (TestDocFileMap keeps it so).
package bootcheck
