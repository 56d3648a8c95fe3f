// Package lane is what sriov-lane's commands do to a lane: up, down,
// repair and reset, each holding the lane's journal and its lock, and the
// read-only ones (check, status, plan's images, export). It puts pkg/sriov,
// pkg/provider, pkg/cni and pkg/reset together; what any of them does on
// its own lives there.
//
// Where things live (TestDocFileMap keeps this list true):
//   - session.go:    Session, one command's hold on a lane, and what its
//     steps are given: Cluster (the provider), NICs (pkg/sriov), the
//     journal, the logger; openLane, the lock down, repair and reset start
//     from
//   - runner.go:     Step, and the one runner of every command's steps: the
//     progress lines, the context checks, and up's undo on failure or Ctrl-C
//   - up.go:         Up, the order of its steps (UpSteps)
//   - steps.go:      every step of up as a value, each journalling what it
//     changes
//   - undo.go:       every undoer the lane's journal needs, the lane's own
//     and pkg/sriov's and pkg/provider's merged
//   - files.go:      files written outside the lane dir, journalled and
//     backed up (kubeconfig, kubevirtci's files)
//   - hooks.go:      post-up and pre-down hooks and their environment
//   - kubevirtci.go: what kubevirtci's cluster-up reads (--kubevirtci)
//   - hostsysctl.go: the host sysctls kubelet changes, given back by the
//     host's last lane
//   - down.go:       Down, from the journal alone: its steps
//   - repair.go:     Repair, PFs back into restarted agents
//   - reset.go:      Reset: pkg/reset's deletes, then repair, then up's wait
//   - check.go:      check's host preflight, also up's first step
//   - pfs.go:        the PF discovery check shows, as up's lease sees it
//   - health.go:     the one reading of a lane's health: where each PF is
//     and how its VFs differ from what up made, for status and repair
//   - describe.go:   status
//   - plan.go:       what plan shows: the images and every object up would
//     apply, never downloading (also what reset waits for)
//   - images.go:     every image a lane pulls (plan --images, load)
//   - export.go:     export logs
package lane
