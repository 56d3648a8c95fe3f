// Package smoke is what `sriov-lane verify` runs on a lane that is up: a
// pod asking for one VF through a sriov NetworkAttachmentDefinition, and
// checks of what the pod shows. The components the lane installs, and the
// generic waits and diagnostics used here, are pkg/cni's.
//
// Where things live (TestDocFileMap keeps this list true):
//   - objects.go: the sriov NetworkAttachmentDefinition and the smoke pod
//     asking for one VF through it
//   - check.go:   the checks of what the pod shows, each a pure function of
//     command output or an annotation
//   - exec.go:    exec in the pod through the API server, bounded
//   - verify.go:  Verify, DeletePod and DeleteNetwork, which run them
//     against the cluster
//   - run.go:     Run, what `verify` does: a fresh pod, its wait, the
//     checks, and the cleanup unless kept
package smoke
