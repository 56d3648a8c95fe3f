package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

// startProc starts one component as k3s starts (in-process) its kubelet,
// kube-proxy and control plane, whose logs therefore reach k3s's stderr,
// the container log k3d and `sriov-lane export logs` read (k3s-io/k3s
// pkg/executor/embed/embed.go@v1.35.5+k3s1: each component's cobra command
// runs in a goroutine of the k3s process). containerd is k3s's child with
// its own log file (k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1:
// Containerd.Log is <data-dir>/agent/containerd/containerd.log), so its
// output is not echoed:
// echo says which kind a component is. With logPath set the output is also
// kept in that file, the stand-in's own, whose tail an exit error quotes.
// Any component exiting ends the supervisor with the reason (proc.Supervise),
// and so restarts the node container (k3d runs nodes with
// restart=unless-stopped), as k3s does.
func startProc(name, logPath string, echo bool, bin string, args ...string) (*proc.Process, error) {
	var out io.Writer
	if echo {
		out = os.Stderr
	}
	logf("Running %s %s", name, strings.Join(args, " "))
	return proc.Start(proc.Spec{Name: name, Bin: bin, Args: args, LogPath: logPath, Echo: out})
}

// unwindGrace is how long a start-up that failed half way gives each
// component it already started to stop on SIGTERM: the node container
// exits next, so nothing is gained by waiting longer.
const unwindGrace = 5 * time.Second
