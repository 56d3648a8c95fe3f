// Command pfmove benchmarks moving 2 stand-in PFs into 2 running
// containers and returning them: pkg/sriov against the shell sequence
// kubevirtci used (hack/bench/shell-pf-move.sh), in the same run, on the
// same rig. Run as root with Docker up; `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"time"

	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/sriovtest"
)

func main() {
	iters := flag.Int("n", 15, "iterations of each variant")
	script := flag.String("shell", "hack/bench/shell-pf-move.sh", "shell baseline script")
	minRatio := flag.Float64("min-ratio", 0, "fail when shell/go median ratio is below this")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *iters, *script, *minRatio); err != nil {
		fmt.Fprintln(os.Stderr, "pf-move:", err)
		os.Exit(1)
	}
}

// Names: links barpf0/barpf1, containers sx-bench-0/1.
var containers = []string{"sx-bench-0", "sx-bench-1"}

// containerCleanupBound caps removing a bench container on the way out,
// Ctrl-C included: a forced remove of an idle sleeper takes well under a
// second, and 30 s still covers a Docker loaded by the run without leaving
// the bench hanging on one that is wedged.
const containerCleanupBound = 30 * time.Second

func run(ctx context.Context, iters int, script string, minRatio float64) error {
	tmp, err := os.MkdirTemp("", "sx-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rigDir := filepath.Join(tmp, "rig")
	// Deferred before creation, so a failed Up is torn down too.
	defer func() {
		if err := rig.Down(rigDir); err != nil {
			fmt.Fprintln(os.Stderr, "pf-move: rig down:", err)
		}
	}()
	st, err := rig.Up(ctx, rig.Options{Dir: rigDir, PFs: 2, Prefix: "barpf"})
	if err != nil {
		return err
	}
	// The fake sysfs is served (FUSE) for as long as the bench runs, and
	// stopped before the rig goes down.
	srv, err := sysfs.Serve(st.ServeConfig(rigDir, log.New(io.Discard, "", 0)))
	if err != nil {
		return fmt.Errorf("serving the fake sysfs: %w", err)
	}
	defer srv.Close()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := sriovtest.EnsureSleeperImage(ctx, cli); err != nil {
		return err
	}
	ids := make([]string, len(containers))
	for i, name := range containers {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), containerCleanupBound)
			defer cancel()
			if err := sriovtest.RemoveContainer(cctx, cli, name); err != nil {
				fmt.Fprintln(os.Stderr, "pf-move:", err)
			}
		}()
		// The shell baseline's netns symlink, if a failed run left it.
		defer os.Remove(filepath.Join("/var/run/netns", name))
		if ids[i], err = sriovtest.RunSleeper(ctx, cli, name); err != nil {
			return err
		}
	}
	pfs, err := sriov.Discover(sriov.Sysfs{Root: st.SysfsRoot})
	if err != nil {
		return err
	}
	var goTimes, shTimes, rawTimes []time.Duration
	for i := range iters {
		raw, err := rawMoves(ctx, cli, pfs, ids)
		if err != nil {
			return fmt.Errorf("raw iteration %d: %w", i, err)
		}
		rawTimes = append(rawTimes, raw)
		d, err := goMove(ctx, cli, filepath.Join(tmp, fmt.Sprintf("go-%d", i)), st.SysfsRoot, pfs, ids)
		if err != nil {
			return fmt.Errorf("go iteration %d: %w", i, err)
		}
		goTimes = append(goTimes, d)
		start := time.Now()
		cmd := exec.CommandContext(ctx, "bash", script, st.PFs[0].Name, containers[0], st.PFs[1].Name, containers[1])
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("shell iteration %d: %w: %s", i, err, out)
		}
		shTimes = append(shTimes, time.Since(start))
	}
	g, s := median(goTimes), median(shTimes)
	ratio := float64(s) / float64(g)
	fmt.Printf("pf-move: go median %.1f ms, shell median %.1f ms, ratio %.1fx (%d iterations, 2 PFs into 2 containers and back)\n",
		ms(g), ms(s), ratio, iters)
	floor := median(rawTimes)
	over := make([]time.Duration, len(goTimes))
	for i := range goTimes {
		over[i] = goTimes[i] - rawTimes[i]
	}
	fmt.Printf("pf-move: kernel floor (4 bare netlink netns moves + set up, no journal/lookups) median %.1f ms (%.1f ms a move); go above it: median %.1f ms\n",
		ms(floor), ms(floor)/4, ms(median(over)))
	// The moves themselves are in both paths, so no implementation of this
	// work beats shell/floor.
	fmt.Printf("pf-move: ceiling for any implementation (shell median / kernel floor) %.1fx\n", float64(s)/float64(floor))
	if ratio < minRatio {
		return fmt.Errorf("ratio %.1fx is below the target %.1fx", ratio, minRatio)
	}
	return nil
}

// goMove is one lane's worth of work: journal, move both PFs in (resolving
// each container's netns through the Docker API), then reverse.
func goMove(ctx context.Context, cli *client.Client, dir, sysfsRoot string, pfs []sriov.PF, ids []string) (time.Duration, error) {
	start := time.Now()
	j, err := journal.Open(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return 0, err
	}
	defer j.Close()
	s := &sriov.Session{Journal: j, Sysfs: sriov.Sysfs{Root: sysfsRoot}, Docker: cli}
	for i, pf := range pfs {
		if _, err := s.MovePF(ctx, pf, sriov.ContainerTarget{ID: ids[i], Docker: cli}); err != nil {
			return 0, err
		}
	}
	if err := journal.Reverse(ctx, j, sriov.Undoers(s.Restorer()), journal.ReverseOptions{}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// rawMoves measures what the kernel alone costs for the same work. Each
// netns move (RTM_NEWLINK with a netns fd, `ip link set netns` alike) runs
// __dev_change_net_namespace under RTNL, which calls rcu_barrier()
// unconditionally after the NETDEV_UNREGISTER notifiers: it sleeps for a
// full normal RCU grace period plus callback invocation, about 4 jiffies
// (~16 ms at HZ=250; more under load), whatever the link's state, IPv6 or
// caller. Two moves at once do not overlap: the second waits on RTNL for the
// first's barrier. No user-space implementation can avoid it.
func rawMoves(ctx context.Context, cli *client.Client, pfs []sriov.PF, ids []string) (time.Duration, error) {
	var nss []netns.NsHandle
	for _, id := range ids {
		ns, err := sriov.ContainerTarget{ID: id, Docker: cli}.Open(ctx)
		if err != nil {
			return 0, err
		}
		defer ns.Close()
		nss = append(nss, ns)
	}
	cur, err := netns.Get()
	if err != nil {
		return 0, err
	}
	defer cur.Close()
	var ths []*netlink.Handle
	for _, ns := range nss {
		th, err := netlink.NewHandleAt(ns)
		if err != nil {
			return 0, err
		}
		defer th.Close()
		ths = append(ths, th)
	}
	start := time.Now()
	for i, pf := range pfs {
		l, err := netlink.LinkByName(pf.Name)
		if err != nil {
			return 0, err
		}
		if err := netlink.LinkSetNsFd(l, int(nss[i])); err != nil {
			return 0, err
		}
		if l, err = ths[i].LinkByName(pf.Name); err != nil {
			return 0, err
		}
		if err := ths[i].LinkSetUp(l); err != nil {
			return 0, err
		}
	}
	for i, pf := range pfs {
		l, err := ths[i].LinkByName(pf.Name)
		if err != nil {
			return 0, err
		}
		if err := ths[i].LinkSetNsFd(l, int(cur)); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	for _, pf := range pfs {
		if l, err := netlink.LinkByName(pf.Name); err == nil {
			_ = netlink.LinkSetDown(l)
		}
	}
	return d, nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
