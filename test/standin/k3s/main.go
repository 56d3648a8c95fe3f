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
	// The image links kubectl to this binary, as the real k3s image links
	// it to its multi-call binary.
	if filepath.Base(args[0]) == "kubectl" {
		return kubectl(args[1:])
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k3s server|agent|kubectl|noop [flags]  (sriov-lane stand-in)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP)
	defer stop()
	var err error
	switch args[1] {
	case "server", "agent":
		f, perr := parseFlags(args[1], args[2:])
		if perr != nil {
			// k3s (urfave/cli) prints the error and exits 1 before starting anything.
			fmt.Fprintf(os.Stderr, "Incorrect Usage: %v\n", perr)
			logf("fatal: %v", perr)
			return 1
		}
		if args[1] == "server" {
			err = runServer(ctx, f)
		} else {
			err = runAgent(ctx, f)
		}
	case "kubectl":
		return kubectl(args[2:])
	case "noop":
		// k3d starts its tools container with `noop` and expects it to stay up.
		<-ctx.Done()
		return 0
	case "--version", "-v", "version":
		fmt.Println("k3s version v1.36.3+k3s1-standin (sriov-lane stand-in: kubelet, kube-apiserver, kube-controller-manager, kube-scheduler v1.36.3; containerd v2.4.2)")
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
