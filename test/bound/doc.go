// Package bound scales the bounds tests wait on with the machine they run
// on: one factor, SRIOV_LANE_TEST_SCALE, that make test sets from the
// cores and the load (hack/test-tiers.sh) and the kernel tier hands to its
// guests. It imports nothing but the standard library, so the stand-in
// modules and the guests' static test binaries use it too.
//
// Where things live (TestDocFileMap keeps this list true):
//   - bound.go: ScaleEnv, Scale and Scaled
package bound
