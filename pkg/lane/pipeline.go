package lane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
)

// Step is one small, named stage of `up`. Host changes a step makes are
// journalled (intent before, done after), which is what makes every step
// undoable: rollback is journal.Reverse, newest change first.
type Step struct {
	Name string
	Run  func(ctx context.Context, c *Session) error
}

// StepTiming is one step's duration, for `up` output and benchmarks.
type StepTiming struct {
	Name     string
	Duration time.Duration
}

// runSteps executes steps in order. On failure or cancellation (SIGINT,
// SIGTERM), it undoes everything journalled so far unless retain is set.
func runSteps(ctx context.Context, c *Session, steps []Step, retain bool) ([]StepTiming, error) {
	var timings []StepTiming
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return timings, c.rollback(fmt.Errorf("interrupted before %s: %w", s.Name, err), retain)
		}
		c.Progress.Start(s.Name)
		err := s.Run(ctx, c)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		d := c.Progress.End(err)
		timings = append(timings, StepTiming{Name: s.Name, Duration: d})
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%s: interrupted: %w", s.Name, err)
			} else {
				err = fmt.Errorf("%s: %w", s.Name, err)
			}
			return timings, c.rollback(err, retain)
		}
	}
	return timings, nil
}

// rollback undoes the journal with a fresh context: the one that failed may
// be cancelled, and the undo must run to the end regardless.
func (c *Session) rollback(cause error, retain bool) error {
	if retain {
		return fmt.Errorf("%w\nlane %q retained as requested (--retain); run 'sriov-lane down --name %s' to remove it", cause, c.Lane.Name, c.Lane.Name)
	}
	c.Progress.Start("undo")
	undoCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := journal.Reverse(undoCtx, c.Journal, c.Undoers(), journal.ReverseOptions{Report: c.reportUndo})
	c.Progress.End(err)
	if err != nil {
		return fmt.Errorf("%w\nundo failed too: %v\nthe journal %s keeps what is left: run 'sriov-lane down --name %s' to finish", cause, err, c.Journal.Path(), c.Lane.Name)
	}
	c.finish()
	return cause
}

func (c *Session) reportUndo(e *journal.Entry, note string, err error) {
	switch {
	case err != nil:
		c.Progress.Infof("undo %s failed: %v", e.Op, err)
	case note != "":
		c.Progress.Infof("%s: %s", e.Op, note)
	default:
		c.Progress.Detailf("undid %s", e.Op)
	}
}
