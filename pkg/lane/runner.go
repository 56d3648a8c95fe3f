package lane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
)

// Step is one stage of a lane command, a value the command's list holds:
// its name is its progress line. Host changes a step makes are journalled
// (intent before, done after), which is what makes every step of up
// undoable: rollback is journal.Reverse, newest change first.
type Step struct {
	Name string
	Run  func(ctx context.Context, c *Session) error
	// If, when set, is asked when the step's turn comes, and the step
	// runs (and shows a line) only when it says so: what an earlier step
	// found decides.
	If func(c *Session) bool
	// GoOn, when set, makes the step's failure a warning ("<error>;
	// <GoOn>") and the run goes on: down's hooks and quiescing must never
	// keep a NIC from the host.
	GoOn string
}

// StepTiming is one step's duration, for `up` output and benchmarks.
type StepTiming struct {
	Name     string
	Duration time.Duration
}

// onFailure is what the runner does when a step fails.
type onFailure int

const (
	// stop returns the failure, unwrapped: the journal keeps what the steps
	// did, for down, or for the same command run again (repair, reset).
	stop onFailure = iota
	// stopNamed is stop with the failed step's name before its error.
	stopNamed
	// undo names the failed step and undoes the journal (up's rollback),
	// or keeps all of it when the session retains (--retain).
	undo
)

// undoTimeout bounds up's own undo: returning PFs and deleting the cluster
// takes seconds to a minute, and a VF whose VFIO holder does not let go is
// waited for within its own bound; past this the journal keeps the rest
// for down.
const undoTimeout = 5 * time.Minute

// run is the one runner of the lane's commands: it runs steps in order,
// one progress line each with its duration, checks ctx (SIGINT, SIGTERM)
// before and after each, and on a failure does what fail says. A step
// whose If says no is passed over without a line.
func (c *Session) run(ctx context.Context, fail onFailure, steps ...Step) ([]StepTiming, error) {
	var timings []StepTiming
	for _, s := range steps {
		if s.If != nil && !s.If(c) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return timings, c.failed(ctx, fail, fmt.Errorf("interrupted before %s: %w", s.Name, err))
		}
		d, err := c.runStep(ctx, s)
		timings = append(timings, StepTiming{Name: s.Name, Duration: d})
		if err == nil {
			continue
		}
		if s.GoOn != "" {
			c.Log.Warnf("%v; %s", err, s.GoOn)
			continue
		}
		if fail != stop {
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%s: interrupted: %w", s.Name, err)
			} else {
				err = fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		return timings, c.failed(ctx, fail, err)
	}
	return timings, nil
}

// runStep runs one step between its progress line's start and end: the
// only place a lane command draws one. A step that returns nil after ctx
// was cancelled failed all the same: what it did may be half done.
func (c *Session) runStep(ctx context.Context, s Step) (time.Duration, error) {
	c.Log.Start(s.Name)
	err := s.Run(ctx, c)
	if err == nil {
		err = ctx.Err()
	}
	return c.Log.End(err), err
}

// failed is what the runner does with cause, the failed step's error.
func (c *Session) failed(ctx context.Context, fail onFailure, cause error) error {
	if fail != undo {
		return cause
	}
	if c.Retain {
		return fmt.Errorf("%w\nlane %q retained as requested (--retain); run 'sriov-lane down --name %s' to remove it", cause, c.Lane.Name, c.Lane.Name)
	}
	// ctx may be what was cancelled (Ctrl-C), and the undo must run to the
	// end regardless (a second Ctrl-C quits the process, see pkg/cmd).
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	_, err := c.runStep(undoCtx, Step{Name: "undo", Run: func(ctx context.Context, c *Session) error {
		return journal.Reverse(ctx, c.Journal, c.undoers, journal.ReverseOptions{Report: c.reportUndo})
	}})
	if err != nil {
		return fmt.Errorf("%w\nundo failed too: %v\nthe journal %s keeps what is left: run 'sriov-lane down --name %s' to finish", cause, err, c.Journal.Path(), c.Lane.Name)
	}
	c.finish()
	return cause
}

func (c *Session) reportUndo(e *journal.Entry, note string, err error) {
	switch {
	case err != nil:
		c.Log.Errorf("undo %s failed: %v", e.Op, err)
	case note != "":
		c.Log.Warnf("%s: %s", e.Op, note)
	default:
		c.Log.V(1).Infof("undid %s", e.Op)
	}
}
