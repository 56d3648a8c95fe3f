// Command lane benchmarks `sriov-lane up` and `down` on the rig against
// k3d's ClusterRun alone for the same cluster shape, in the same run, the
// time each PF takes to come back once its undo starts, and `reset` after a
// job's namespace and ClusterRole next to up. It prints medians and checks
// them against the project's targets (report.go: lane overhead under 1.5 s
// beyond ClusterRun plus the wait, down under 2 s, PF back in under 100 ms,
// reset under 10% of up). Run as root with Docker up; `make
// bench` runs it.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:    flags and the run: bench made, measured, reported, undone
//   - rig.go:     the bench: a rig with its in-process fake kernel, the lane
//     and baseline configs, everything undone in dependency order
//   - measure.go: the timed iterations: k3d's ClusterRun alone, the lane's
//     up, down and reset, alternated so machine drift hits both
//   - report.go:  medians, spreads and the verdicts against the targets
package main
