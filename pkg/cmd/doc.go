// Package cmd holds sriov-lane's cobra commands, one command per file: each
// file parses its flags, calls pkg/lane (or pkg/smoke, pkg/cni) and prints
// the result on stdout; progress and logs go to stderr through the run's
// logger. What a command does to a lane lives in pkg/lane, not here.
//
// Where things live (TestDocFileMap keeps this list true):
//   - root.go:      the root command and its tree, the flags every command
//     shares, exit codes (2 for bad input), Ctrl-C handling, the run's
//     Docker client and logger
//   - laneflags.go: --config, --name and the lane settings as flags; a
//     lane's saved config; running on every lane (--all)
//   - version.go:   version
//   - plan.go:      plan: the defaulted config, the images and every object
//     up would apply
//   - check.go:     check: the host preflight
//   - up.go:        up
//   - down.go:      down
//   - status.go:    status
//   - repair.go:    repair
//   - reset.go:     reset
//   - verify.go:    verify: the smoke pod that takes one VF, checked inside
//   - load.go:      load: host Docker images into every node
//   - export.go:    export logs
//   - fleet.go:       fleet and the --config flag its commands share
//   - fleetrender.go: fleet render: a CI fleet's objects, from the fleet file
//   - fleetjob.go:    fleet job: the fleet's job pod, or a Prow presubmit
//   - fleetpfs.go:    fleet pfs: on a fleet host, its pool's PFs, and --return
package cmd
