package lane

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// UpOptions tune Up.
type UpOptions struct {
	// Docker is the command run's Docker client (nil: Up makes its own).
	Docker        *client.Client
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
		{"bind PFs into agents", stepBindPFs},
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
	if l.Dir().Exists() {
		return nil, fmt.Errorf("lane %q already exists (journal %s): run 'sriov-lane down --name %s' first, or pick another --name", l.Name, l.Dir().Journal(), l.Name)
	}
	cli, release, err := dockerFor(opts.Docker)
	if err != nil {
		return nil, err
	}
	defer release()
	progress := NewProgress(opts.Out, opts.Verbose)
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
func newUpSession(l *config.Lane, opts UpOptions, cli *client.Client, progress *Progress) *Session {
	return &Session{
		Lane: l, Progress: progress, Docker: cli, Provider: provider.NewWithClient(cli),
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

// removeLaneDir deletes the lane's directory once its journal is empty:
// what is left there (saved config, kubeconfig, machine-ids, a temp file a
// kill left behind) belongs to the lane alone.
func removeLaneDir(l *config.Lane) {
	os.RemoveAll(l.Dir().Path())
}

// PreflightError is a failed preflight: nothing on the host was changed.
type PreflightError struct{ Failed []CheckResult }

func (e *PreflightError) Error() string {
	s := "preflight failed, nothing was changed:"
	for _, r := range e.Failed {
		s += fmt.Sprintf("\n  %s: %s", r.Name, r.Message)
		if r.Hint != "" {
			s += " (" + r.Hint + ")"
		}
	}
	return s + "\nrun 'sriov-lane check' for the full report"
}

func stepPreflight(ctx context.Context, c *Session) error {
	ck := &Checker{Lane: c.Lane, Docker: c.Docker, PFs: PFReportFunc(c.Lane)}
	var failed []CheckResult
	for _, r := range ck.Run(ctx) {
		if r.Status == Fail {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		return &PreflightError{Failed: failed}
	}
	return nil
}
