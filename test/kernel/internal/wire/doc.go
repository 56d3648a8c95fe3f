// Package wire is what the kernel tier's host (test/kernel/vm) and guest
// init (test/kernel/cmd/guest-init) agree on: the guest's configuration in
// the initramfs and the JSON-lines records the guest sends back on its
// second serial port.
//
// Where things live (TestDocFileMap keeps this list true):
//   - wire.go: the paths, Config and Record
package wire
