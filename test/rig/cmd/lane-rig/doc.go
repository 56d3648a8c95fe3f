// Command lane-rig brings the SR-IOV stand-in rig up and down for manual
// runs and for `make test-env`: veth PFs and a detached kernel emulator
// process serving the fake sysfs and /dev/vfio over FUSE.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:        the command tree and up, down and emulate, the
//     detached process that serves the fake kernel; sweep, what killed
//     test runs left (testutil.Sweep)
//   - push.go:        push-image, a local image pushed to the rig registry
//     with uncompressed layers
//   - env.go:         env, `make test-env`'s part after the host's set-up:
//     its flags, cache root and run
//   - envphases.go:   env's phases in order, and the tool sets it builds
//     from Go modules
//   - envbuild.go:    one `go build` of a tool set, skipped when the content
//     key of its inputs is unchanged
//   - envimage.go:    the FROM-scratch stand-in images, built through the
//     Docker API when their content key changed
//   - envregistry.go: the rig registry and the images it serves under their
//     upstream names
//   - envpodman.go:   the host images of rig lanes on Podman copied into
//     Podman's store when their IDs differ from Docker's
//   - envkernel.go:   the kernel tier's guest kernels: Debian's linux-image
//     packages resolved with apt-cache, vmlinuz and the modules it loads
//     unpacked once per package file
//   - envlog.go:      env's output, "test-env: " lines with a timing per
//     phase
package main
