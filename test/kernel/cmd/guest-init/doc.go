// Command guest-init is /init of the kernel tier's QEMU guest
// (test/kernel/vm builds it into the initramfs): it mounts what programs
// need, loads the modules, runs each program with its output captured,
// sends a record per module, run and output file on the second serial port
// as JSON lines, ends the stream with an end record and powers off.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go: all of it: mounts, modules, programs, records, power off
package main
