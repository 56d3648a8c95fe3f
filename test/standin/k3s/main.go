// Command k3s is a stand-in for the k3s binary inside k3d node containers,
// for tests on machines without a container registry. It honours the
// contract k3d v5.9.0 relies on (subcommands, log lines, kubeconfig and
// CoreDNS manifest locations) while the control plane is a real etcd and
// kube-apiserver. Agents register a Node and advertise SR-IOV resources
// computed from the (fake) sysfs, as the device plugin would. There is no
// kubelet, no containerd and no pod will ever run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	// The image links kubectl, iptables-save/-restore and friends to this
	// binary, as the real k3s image does for its multi-call binary.
	switch filepath.Base(args[0]) {
	case "kubectl":
		return kubectl(args[1:])
	case "iptables-save", "ip6tables-save":
		// No rules to save: k3d's DNS fix pipes this through sed into
		// iptables-restore; an empty rule set keeps that pipeline working.
		return 0
	case "iptables-restore", "ip6tables-restore":
		return drainStdin()
	case "ctr", "crictl", "containerd":
		fmt.Fprintf(os.Stderr, "stand-in k3s has no %s: no container runtime runs inside stand-in nodes\n", filepath.Base(args[0]))
		return 1
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k3s server|agent|kubectl|noop [flags]  (sriov-lane stand-in)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP)
	defer stop()
	var err error
	switch args[1] {
	case "server":
		err = runServer(ctx, parseFlags(args[2:]))
	case "agent":
		err = runAgent(ctx, parseFlags(args[2:]))
	case "kubectl":
		return kubectl(args[2:])
	case "noop":
		// k3d starts its tools container with `noop` and expects it to stay up.
		<-ctx.Done()
		return 0
	case "--version", "-v", "version":
		fmt.Println("k3s version v1.35.5+k3s1-standin (sriov-lane stand-in)")
		return 0
	default:
		fmt.Fprintf(os.Stderr, "stand-in k3s: unknown subcommand %q (supported: server, agent, kubectl, noop)\n", args[1])
		return 2
	}
	if err != nil && ctx.Err() == nil {
		logf("fatal: %v", err)
		return 1
	}
	return 0
}

// logf writes k3s-style log lines to stderr, which k3d scans for readiness.
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "time=%q level=info msg=%q\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, a...))
}

func drainStdin() int {
	buf := make([]byte, 32*1024)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			return 0
		}
	}
}
