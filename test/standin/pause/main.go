// Command pause is the stand-in sandbox ("pause") container of the rig's
// nodes, built locally because no registry is reachable. The rig serves it
// under the name k3s v1.35.5 pulls, rancher/mirrored-pause:3.6 (see
// test/standin/k3s defaultPauseImage). Its Linux program is kubernetes
// build/pause/linux/pause.c, read at v1.36.3 (TAG 3.10.2 in its Makefile):
// every release from 3.6 to 3.10.2 changed only the Windows image
// (build/pause/CHANGELOG.md@v1.36.3), so 3.6's Linux program is this one but
// for the version it prints. Like it, the stand-in prints its version for a -v anywhere among
// its arguments (compared case-insensitively) and ignores the rest, warns
// on stderr when it is not PID 1, holds the pod's namespaces open, reaps
// every child that exits (as PID 1 of a pod sharing its PID namespace,
// orphans become its children), and on SIGINT or SIGTERM prints what
// psignal(3) prints and exits 0. Other signals keep their default action.
// conformance_test.go holds the rows.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is what pause.c prints for -v: "pause.c v<TAG>-<REV>" (Makefile
// CFLAGS -DVERSION=v$(TAG)-$(REV), REV from git describe).
const version = "pause.c v3.6-sriov-lane-standin"

// signalText is glibc's strsignal for the signals pause handles, which
// psignal(3) prints.
var signalText = map[os.Signal]string{syscall.SIGINT: "Interrupt", syscall.SIGTERM: "Terminated"}

func main() {
	for _, a := range os.Args[1:] {
		if strings.EqualFold(a, "-v") {
			fmt.Println(version)
			return
		}
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %s\n", signalText[s])
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
