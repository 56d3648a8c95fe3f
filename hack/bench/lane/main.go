package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	k3dlogger "github.com/k3d-io/k3d/v5/pkg/logger"
)

type options struct {
	iters   int
	prefix  string
	port    int
	verbose bool
	strict  bool
	// pfs is the number of stand-in PFs, which is also the agent count.
	pfs int
}

func main() {
	var o options
	flag.IntVar(&o.iters, "n", 5, "iterations of each measurement")
	flag.IntVar(&o.pfs, "pfs", 2, "stand-in PFs on the rig (one agent per PF)")
	// Links <prefix>0.., netns <prefix>-peers: the bench's own names.
	flag.StringVar(&o.prefix, "prefix", "bl", "rig link prefix")
	flag.IntVar(&o.port, "port", 17443, "first API port (ClusterRun baseline uses it, the lane the next)")
	flag.BoolVar(&o.verbose, "v", false, "stream the lane's step output and k3d's log")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed")
	flag.Parse()
	if !o.verbose {
		k3dlogger.Log().SetLevel(logrus.WarnLevel)
	}
	// Further signals are swallowed until cleanup is over: a second Ctrl-C
	// must not leave PFs in a cluster.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, o)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, o options) int {
	b, err := newBench(ctx, o)
	// The bench's teardown runs whatever happened, and before the exit.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := b.close(cctx); err != nil {
			fmt.Fprintln(os.Stderr, "lane bench: cleanup:", err)
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lane bench:", err)
		return 1
	}
	res, err := b.measure(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lane bench:", err)
		return 1
	}
	if missed := res.print(os.Stdout, b.describe()); missed && o.strict {
		return 1
	}
	return 0
}
