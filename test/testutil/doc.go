// Package testutil holds helpers shared by the project's tests. It lives
// under test/ because nothing here may ever be imported by product code.
//
// Where things live (TestDocFileMap keeps this list true):
//   - require.go:   a test's prerequisites (root, Docker, an image, the rig's
//     assets and image mirror), skipped or, under
//     SRIOV_LANE_TEST_STRICT=1, failed; the stand-in image names
//   - bounds.go:    CommandBound and APIServerReadyBound, how long tests
//     give a command and a control plane under make test's load
//   - slot.go:      TakeSlot, one test's own lane names, rig prefix and
//     ports, so tests running at once never collide
//   - sweep.go:     Sweep, what killed runs left under the names of slots
//     nobody holds (containers, networks, volumes, mounts, links, netns)
//   - dockerlock.go: the host's Docker held shared by its users
//     (RequireDockerClient) and alone by the test restarting dockerd
//     (RequireDockerAlone)
//   - leftovers.go: K3dLeftovers, what of a k3d cluster is still there
//     after a test
//   - links.go:     HandleAt, a netlink handle in a pinned netns, and
//     LinkWithMAC
//   - golden.go:    Golden, a test's output against its golden file
//   - command.go:   ExitCode, how a command a test ran ended
//   - http.go:      RoundTripperFunc, an http.RoundTripper of a func
package testutil
