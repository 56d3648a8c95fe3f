package lane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// DownOptions tune Down.
type DownOptions struct {
	// Engines are the command run's clients of the container engines.
	Engines *provider.Engines
	// Out takes the progress, the log and hooks' output: the command's
	// stderr (results are the caller's, for stdout).
	Out     io.Writer
	Verbose bool
	// Force keeps going past a failed undo and returns PFs to the current
	// netns even if it is not the one they were taken from.
	Force bool
}

// DownReport says what Down did.
type DownReport struct {
	NothingToDo bool
	Notes       []string
	// PFReturn is, per PF move undone, the time from the start of its undo
	// until the PF was back.
	PFReturn []time.Duration
}

// ResolveSaved replaces l by the config `up` saved for the lane of that
// name and state dir, when there is one: `down --name N` then acts exactly
// on what `up` made, whatever flags it is given now. A saved config that
// cannot be read is reported to logger and the given one used.
func ResolveSaved(l *config.Lane, logger log.Logger) (*config.Lane, error) {
	b, err := os.ReadFile(l.Dir().SavedConfig())
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	saved := &config.Lane{}
	if err := config.DecodeStrict(b, saved); err != nil {
		// The journal alone is enough to tear down; never let a damaged
		// copy of the config keep PFs away from the host.
		logger.Warnf("ignoring unreadable saved config %s (%v); using the given settings", l.Dir().SavedConfig(), err)
		return l, nil
	}
	config.SetDefaults(saved)
	return saved, nil
}

// Down tears the lane down from its journal: PFs back first (original
// names, original netns, numvfs 0), then cluster and registry, then leases.
func Down(ctx context.Context, l *config.Lane, opts DownOptions) (DownReport, error) {
	var rep DownReport
	if !l.Dir().HasJournal() {
		// An up killed before its journal existed changed nothing on the
		// host but may have left its (empty) directory.
		removeLaneDir(l)
		rep.NothingToDo = true
		return rep, nil
	}
	c, closeLane, err := openLane(l, opts.Engines, opts.Out, opts.Verbose, opts.Force)
	if err != nil {
		return rep, err
	}
	defer closeLane()
	return c.down(ctx, opts.Force)
}

// down runs down's steps on an opened lane: its pre-down hooks, the agents
// stopped, then the whole journal undone, newest first. force keeps going
// past a failed undo.
func (c *Session) down(ctx context.Context, force bool) (DownReport, error) {
	var rep DownReport
	_, err := c.run(ctx, stop, preDownHooksStep, stopAgentsStep, Step{Name: "return PFs and delete lane", Run: func(ctx context.Context, c *Session) error {
		return returnAll(ctx, c, force, &rep)
	}})
	if err != nil {
		return rep, fmt.Errorf("lane %s: %w\nthe journal %s keeps what is left: fix the cause and run down again (--force to continue past failures)", c.Lane.Name, err, c.Journal.Path())
	}
	c.finish()
	return rep, nil
}

// Down's steps before the undo proper.
var (
	preDownHooksStep = Step{
		Name: "pre-down hooks",
		If:   func(c *Session) bool { return len(c.Lane.Hooks.PreDown) > 0 },
		Run: func(ctx context.Context, c *Session) error {
			return runHooks(ctx, c, "pre-down", c.Lane.Hooks.PreDown, c.Lane.KubeconfigPath())
		},
		// A failing hook must not keep NICs away from the host.
		GoOn: "tearing down anyway",
	}
	// Quiesce: a VM still running in an agent holds its VF's VFIO group,
	// and the kernel blocks unbinding it until QEMU lets go. Stopping the
	// agents ends every such holder; their netns are pinned, so the PFs and
	// VF netdevs in them stay reachable.
	stopAgentsStep = Step{
		Name: "stop agents",
		If:   func(c *Session) bool { return hasPending(c.Journal, sriov.OpPin) },
		Run:  func(ctx context.Context, c *Session) error { return c.Provider.StopAgents(ctx, c.Lane.ClusterName()) },
		// Not fatal: each VF undo still waits for its holders, bounded, and
		// names them.
		GoOn: "going on",
	}
)

// returnAll undoes the whole journal, newest first, telling rep how long
// each PF took to come back and what each undo noted.
func returnAll(ctx context.Context, c *Session, force bool, rep *DownReport) error {
	var started time.Time
	return journal.Reverse(ctx, c.Journal, c.undoers, journal.ReverseOptions{
		KeepGoing: force,
		Before:    func(*journal.Entry) { started = time.Now() },
		Report: func(e *journal.Entry, note string, err error) {
			if err == nil && sriov.IsPFMove(e) {
				rep.PFReturn = append(rep.PFReturn, time.Since(started))
			}
			if note != "" {
				rep.Notes = append(rep.Notes, e.Op+": "+note)
			}
			if err == nil && note == "" {
				// -v: where down's time goes, one line an undo.
				c.Log.V(1).Infof("undid %s (%s)", e.Op, time.Since(started).Round(time.Millisecond))
				return
			}
			c.reportUndo(e, note, err)
		},
	})
}

// hasPending reports whether the journal holds an operation of kind op
// not yet undone.
func hasPending(j *journal.Journal, op string) bool {
	for _, e := range j.Pending() {
		if e.Op == op {
			return true
		}
	}
	return false
}
