// Package rig stands in for SR-IOV hardware: veth "PFs" on the host, and a
// fake sysfs and /dev/vfio describing them, served over FUSE by the fake
// kernel of test/rig/sysfs, which answers writes as the real one would.
// `lane-rig` drives it from the command line, the fake kernel then running
// in a detached emulator process; tests use NewForTest, which serves it from
// the test process.
//
// Where things live (TestDocFileMap keeps this list true):
//   - rig.go:        Options, Up and Down: the PF links and their peers'
//     netns, the mount points, what the emulator serves
//   - state.go:      DIR/rig.json, everything Down needs to undo Up, and
//     the names of the rig directory's files
//   - process.go:    the detached emulator process: started, found by its
//     PID file, stopped without killing a recycled PID
//   - laneconfig.go: the lane.yaml lane-rig up writes for the rig's PFs
//   - fortest.go:    NewForTest, a rig for one test, undone when it ends
package rig
