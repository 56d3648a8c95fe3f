package lane

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// UpOptions tune Up.
type UpOptions struct {
	// Engines are the command run's clients of the container engines.
	Engines *provider.Engines
	// Out takes the progress, the log and hooks' output: the command's
	// stderr (results are the caller's, for stdout).
	Out           io.Writer
	Verbose       bool
	Retain        bool
	KubevirtciDir string
}

// UpSteps is the ordered pipeline of `up`. Each step journals the host
// changes it makes, so any prefix of it can be undone by journal.Reverse.
// Repair and reset run some of these very values again.
func UpSteps() []Step {
	return []Step{
		preflightStep, leaseStep, createClusterStep, prepareNodesStep, movePFsStep, vfsStep,
		labelNodesStep, deployComponentsStep, waitStep, outputsStep, postUpHooksStep, recordBaselineStep,
	}
}

// Up brings the lane up. On failure or interruption it undoes what it did
// (PFs first) unless opts.Retain.
func Up(ctx context.Context, l *config.Lane, opts UpOptions) ([]StepTiming, error) {
	if l.Dir().HasJournal() {
		return nil, fmt.Errorf("lane %q already exists (journal %s): run 'sriov-lane down --name %s' first, or pick another --name", l.Name, l.Dir().Journal(), l.Name)
	}
	cli, err := opts.Engines.Client(l.ContainerEngine)
	if err != nil {
		return nil, err
	}
	c := newUpSession(l, opts, cli, log.NewPrinter(opts.Out, opts.Verbose))
	// Preflight runs before the journal exists: a lane that fails it leaves
	// no trace on the host.
	steps := UpSteps()
	if _, err := c.run(ctx, stop, steps[0]); err != nil {
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
	return c.run(ctx, undo, steps[1:]...)
}

// newUpSession is what Up's steps start from: every option that changes how
// a step behaves is carried here, where the steps can see it.
func newUpSession(l *config.Lane, opts UpOptions, cli *client.Client, progress *log.Printer) *Session {
	p := provider.NewWithClient(cli)
	return &Session{
		Lane: l, Log: progress, Docker: cli, Provider: p, engines: opts.Engines, undoers: undoers(l, cli, p, false), kubeFor: kube.Connect,
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
