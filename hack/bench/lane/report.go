package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

type results struct{ samples []sample }

// The targets, on the rig: what a lane may add to k3d's own cluster
// creation, and how fast down and a PF's return must be.
const (
	targetOverhead = 1500 * time.Millisecond
	targetDown     = 2 * time.Second
	targetPFBack   = 100 * time.Millisecond
	// reset must cost a small part of up, or a job would rather make a
	// new lane: under this fraction of up.
	targetResetOfUp = 0.10
)

func (r results) median(f func(sample) time.Duration) time.Duration {
	var ds []time.Duration
	for _, s := range r.samples {
		ds = append(ds, f(s))
	}
	return median(ds)
}

func (r results) spread(f func(sample) time.Duration) (lo, hi time.Duration) {
	for i, s := range r.samples {
		d := f(s)
		if i == 0 || d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}
	return lo, hi
}

// print writes the table and the verdicts; it reports whether a target
// was missed.
func (r results) print(w io.Writer, desc string) (missed bool) {
	fmt.Fprintf(w, "lane: %s\n", desc)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmedian\tmin\tmax\t")
	row := func(name string, f func(sample) time.Duration, unit func(time.Duration) string) {
		lo, hi := r.spread(f)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, unit(r.median(f)), unit(lo), unit(hi))
	}
	row("k3d ClusterRun alone", func(s sample) time.Duration { return s.clusterRun }, sec)
	row("k3d ClusterDelete alone", func(s sample) time.Duration { return s.clusterDelete }, sec)
	row("sriov-lane up, to every component pod Ready and VFs allocatable", func(s sample) time.Duration { return s.up }, sec)
	if len(r.samples) > 0 {
		for _, st := range r.samples[0].steps {
			name := st.Name
			row("  "+name, func(s sample) time.Duration { return s.step(name) }, sec)
		}
		// Up's timings cover the steps after preflight; the rest is
		// preflight, opening the journal and connecting to Docker.
		rest := func(s sample) time.Duration {
			var t time.Duration
			for _, st := range s.steps {
				t += st.Duration
			}
			return s.up - t
		}
		row("  preflight, journal, setup", rest, sec)
	}
	row("sriov-lane up, datastore on disk", func(s sample) time.Duration { return s.upOnDisk }, sec)
	row("sriov-lane reset, after a job's namespace and ClusterRole", func(s sample) time.Duration { return s.reset }, sec)
	row("sriov-lane down", func(s sample) time.Duration { return s.down }, sec)
	row("PF back (slowest PF)", func(s sample) time.Duration { return s.pfBack }, msec)
	row("lane overhead: up - (create + wait)", sample.overhead, sec)
	row("up - ClusterRun alone - wait", func(s sample) time.Duration { return s.up - s.clusterRun - s.step(stepWait) }, sec)
	tw.Flush()

	run, up := r.median(func(s sample) time.Duration { return s.clusterRun }), r.median(func(s sample) time.Duration { return s.up })
	if run > 0 {
		fmt.Fprintf(w, "ratio up / ClusterRun alone: %.2fx\n", float64(up)/float64(run))
	}
	if disk := r.median(func(s sample) time.Duration { return s.upOnDisk }); up > 0 && disk > 0 {
		fmt.Fprintf(w, "ratio up with the datastore on disk / on tmpfs (server.datastoreOnTmpfs): %.2fx\n", float64(disk)/float64(up))
	}
	verdict := func(what string, got, target time.Duration, unit func(time.Duration) string) {
		v := "PASS"
		if got >= target {
			v, missed = "MISS", true
		}
		fmt.Fprintf(w, "%s  %s: median %s, target < %s\n", v, what, unit(got), unit(target))
	}
	if reset := r.median(func(s sample) time.Duration { return s.reset }); up > 0 {
		ratio := float64(reset) / float64(up)
		v := "PASS"
		if ratio >= targetResetOfUp {
			v, missed = "MISS", true
		}
		fmt.Fprintf(w, "%s  reset / up: median %s / %s = %.1f%%, target < %.0f%%\n", v, sec(reset), sec(up), 100*ratio, 100*targetResetOfUp)
	}
	verdict("lane overhead beyond ClusterRun + wait", r.median(sample.overhead), targetOverhead, sec)
	verdict("down", r.median(func(s sample) time.Duration { return s.down }), targetDown, sec)
	verdict("PF back after its undo starts", r.median(func(s sample) time.Duration { return s.pfBack }), targetPFBack, msec)
	return missed
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sec(d time.Duration) string  { return fmt.Sprintf("%.2f s", d.Seconds()) }
func msec(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
