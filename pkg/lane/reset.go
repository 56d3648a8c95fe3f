package lane

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/reset"
)

// DefaultResetTimeout bounds reset's wait for what it deleted to be gone.
const DefaultResetTimeout = 2 * time.Minute

// ResetOptions tune Reset.
type ResetOptions struct {
	// Engines are the command run's clients of the container engines.
	Engines *provider.Engines
	// Out takes the progress, the log and hooks' output: the command's
	// stderr (results are the caller's, for stdout).
	Out     io.Writer
	Verbose bool
	// Timeout bounds the wait for the deleted namespaces (and objects with
	// finalizers) to be gone; DefaultResetTimeout when zero.
	Timeout time.Duration
}

// ResetReport says what Reset did.
type ResetReport struct {
	// Namespaces and Objects are what reset deleted ("ClusterRole x").
	Namespaces []string
	Objects    []string
	// Repaired are the agents whose PFs or VFs were put back.
	Repaired []string
}

// Reset returns a running lane to the state up left it in, for the next CI
// job, without recreating the cluster. It deletes the namespaces and the
// cluster-scoped objects that are not in the baseline up recorded, minus
// what the system makes on its own, empties the namespaces itself and waits
// until everything is gone (pkg/reset does all that), checks that every PF
// is in its agent with its VFs as configured (the checks and repair of
// `repair`), and waits as up does.
func Reset(ctx context.Context, l *config.Lane, opts ResetOptions) (ResetReport, error) {
	var rep ResetReport
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultResetTimeout
	}
	if err := requireLane(l); err != nil {
		return rep, err
	}
	b, err := reset.Load(l.Name, l.Dir())
	if err != nil {
		return rep, err
	}
	// The journal's lock keeps up, down and repair off the lane meanwhile.
	c, closeLane, err := openLane(l, opts.Engines, opts.Out, opts.Verbose, false)
	if err != nil {
		return rep, err
	}
	defer closeLane()
	if err := c.connect(); err != nil {
		return rep, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	fail := func(err error) (ResetReport, error) {
		return rep, fmt.Errorf("resetting lane %s: %w", l.Name, err)
	}

	// One bound for every wait on deletions, as --timeout promises.
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	said := map[string]bool{}
	// pass deletes what the baseline does not hold, then waits for it to
	// be gone; it says how many namespaces it deleted.
	pass := func(name string) (int, error) {
		var p reset.Pass
		deleteStep := Step{Name: name, Run: func(ctx context.Context, c *Session) (err error) {
			p, err = reset.Delete(ctx, c.Kube, b, c.Log)
			rep.Namespaces = append(rep.Namespaces, p.Namespaces...)
			rep.Objects = append(rep.Objects, p.Objects...)
			for _, lost := range p.Lost {
				if !said[lost] {
					said[lost] = true
					c.Log.Warnf("%s: reset cannot bring back what up made there; run 'sriov-lane down --name %s', then up, if the lane misses it", lost, l.Name)
				}
			}
			return err
		}}
		waitGone := Step{
			Name: "wait for deletions",
			If:   func(*Session) bool { return p.Waits() },
			Run:  func(_ context.Context, c *Session) error { return p.Wait(wctx, c.Kube, c.Log) },
		}
		_, err := c.run(ctx, stop, deleteStep, waitGone)
		return len(p.Namespaces), err
	}
	namespaces, err := pass("delete what up did not make")
	if err != nil {
		return fail(err)
	}
	if namespaces > 0 {
		// The controllers in those namespaces ran until their pods were
		// gone, and an operator among them (KubeVirt's reconciles its CRDs,
		// webhooks and ClusterRoles) may have made again what was deleted.
		if _, err := pass("delete what came back"); err != nil {
			return fail(err)
		}
	}

	repaired, err := repairAgents(ctx, c)
	rep.Repaired = repaired
	if err != nil {
		return fail(err)
	}
	if _, err := c.run(ctx, stop, restartDevicePluginsStep(c, repaired), Step{Name: waitStep.Name, Run: waitAsUp}); err != nil {
		return fail(err)
	}
	return rep, nil
}

// waitAsUp runs up's own wait (nodes Ready, the lane's DaemonSets rolled
// out, Calico available, every agent's VFs allocatable) on an opened and
// connected lane, for the objects up applied as the lane's config makes
// them again.
func waitAsUp(ctx context.Context, c *Session) error {
	// Only the names of the lane's workloads are needed.
	cs, err := plannedComponents(ctx, c.Lane, c.pfNamesInNodes())
	if err != nil {
		c.Log.Warnf("not waiting for the lane's DaemonSets: %v", err)
	}
	objs, _ := cni.Flatten(cs)
	return waitFor(ctx, c, objs)
}
