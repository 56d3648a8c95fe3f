package lane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// UpOptions tune Up.
type UpOptions struct {
	// Docker is the command run's Docker client (nil: Up makes its own).
	Docker *client.Client
	// Out takes the progress, the log and hooks' output: the command's
	// stderr (results are the caller's, for stdout).
	Out           io.Writer
	Verbose       bool
	Retain        bool
	KubevirtciDir string
}

// UpSteps is the ordered pipeline of `up`. Each step journals the host
// changes it makes, so any prefix of it can be undone by journal.Reverse.
func UpSteps() []Step {
	return []Step{
		{"preflight", stepPreflight},
		{"lease PFs", stepLease},
		{"create cluster", stepCreateCluster},
		{"prepare nodes", stepPrepareNodes},
		{"move PFs into agents", stepMovePFs},
		{"create VFs and bind drivers", stepVFs},
		{"label nodes", stepLabelNodes},
		{"deploy components", stepDeployComponents},
		{"wait for VFs", stepWait},
		{"write outputs", stepOutputs},
		{"post-up hooks", stepPostUpHooks},
		{"record baseline", stepRecordBaseline},
	}
}

// Up brings the lane up. On failure or interruption it undoes what it did
// (PFs first) unless opts.Retain.
func Up(ctx context.Context, l *config.Lane, opts UpOptions) ([]StepTiming, error) {
	if l.Dir().HasJournal() {
		return nil, fmt.Errorf("lane %q already exists (journal %s): run 'sriov-lane down --name %s' first, or pick another --name", l.Name, l.Dir().Journal(), l.Name)
	}
	cli, release, err := dockerFor(opts.Docker, l.ContainerEngine)
	if err != nil {
		return nil, err
	}
	defer release()
	progress := log.NewPrinter(opts.Out, opts.Verbose)
	c := newUpSession(l, opts, cli, progress)
	// Preflight runs before the journal exists: a lane that fails it leaves
	// no trace on the host.
	steps := UpSteps()
	progress.Start(steps[0].Name)
	err = steps[0].Run(ctx, c)
	progress.End(err)
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		return nil, err
	}
	defer j.Close()
	c.Journal = j
	if err := saveConfig(l); err != nil {
		c.finish()
		return nil, err
	}
	c.startSRIOV()
	timings, err := runSteps(ctx, c, steps[1:], c.Retain)
	return timings, err
}

// newUpSession is what Up's steps start from: every option that changes how
// a step behaves is carried here, where the steps can see it.
func newUpSession(l *config.Lane, opts UpOptions, cli *client.Client, progress *log.Printer) *Session {
	return &Session{
		Lane: l, Log: progress, Docker: cli, Provider: provider.NewWithClient(cli),
		Out: opts.Out, KubevirtciDir: opts.KubevirtciDir, Retain: opts.Retain,
	}
}

func saveConfig(l *config.Lane) error {
	b, err := config.Marshal(l)
	if err != nil {
		return err
	}
	// Atomically: a torn file would stop `down --name` from reading it.
	if err := atomicfile.Write(l.Dir().SavedConfig(), b, 0o600); err != nil {
		return fmt.Errorf("saving lane config: %w", err)
	}
	return nil
}

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
			return timings, c.rollback(ctx, fmt.Errorf("interrupted before %s: %w", s.Name, err), retain)
		}
		c.Log.Start(s.Name)
		err := s.Run(ctx, c)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		d := c.Log.End(err)
		timings = append(timings, StepTiming{Name: s.Name, Duration: d})
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%s: interrupted: %w", s.Name, err)
			} else {
				err = fmt.Errorf("%s: %w", s.Name, err)
			}
			return timings, c.rollback(ctx, err, retain)
		}
	}
	return timings, nil
}

// undoTimeout bounds up's own undo: returning PFs and deleting the cluster
// takes seconds to a minute, and a VF whose VFIO holder does not let go is
// waited for within its own bound; past this the journal keeps the rest
// for down.
const undoTimeout = 5 * time.Minute

// rollback undoes the journal with a context ctx's cancellation does not
// reach: ctx may be what was cancelled (Ctrl-C), and the undo must run to
// the end regardless (a second Ctrl-C quits the process, see pkg/cmd).
func (c *Session) rollback(ctx context.Context, cause error, retain bool) error {
	if retain {
		return fmt.Errorf("%w\nlane %q retained as requested (--retain); run 'sriov-lane down --name %s' to remove it", cause, c.Lane.Name, c.Lane.Name)
	}
	c.Log.Start("undo")
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	err := journal.Reverse(undoCtx, c.Journal, c.Undoers(), journal.ReverseOptions{Report: c.reportUndo})
	c.Log.End(err)
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
