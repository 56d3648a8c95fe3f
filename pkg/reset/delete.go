package reset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/log"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// Pass is one pass of reset's deletes: what it deleted, and what is left to
// wait for until the lane is back to its baseline.
type Pass struct {
	// Namespaces and Objects name what the pass deleted ("ClusterRole x").
	Namespaces []string
	Objects    []string
	// Lost are the baseline's namespaces that are gone or going: reset
	// cannot bring back what up made there.
	Lost []string

	waitNamespaces, waitObjects []objectRef
	waitClaims                  []jobClaim
}

// Delete reads the cluster, compares it with b and deletes what b does not
// hold (planReset says what stays). The Pass names what was deleted even
// when err is set; its Wait is the rest of the job.
func Delete(ctx context.Context, kc *kube.Clients, b *Baseline, logger log.Logger) (Pass, error) {
	p, deleted, err := deletePass(ctx, kc, b, logger)
	pass := Pass{Lost: p.Lost}
	if err == nil {
		pass.waitClaims, err = deleteJobClaims(ctx, kc.Typed, p.Kept, b.Recorded, logger)
		for _, c := range pass.waitClaims {
			pass.Objects = append(pass.Objects, c.String())
		}
	}
	for _, o := range deleted {
		if o.isNamespace() {
			pass.Namespaces = append(pass.Namespaces, o.Name)
		} else {
			pass.Objects = append(pass.Objects, o.String())
		}
	}
	if err == nil {
		pass.waitNamespaces, pass.waitObjects = p.waitFor(deleted)
	}
	return pass, err
}

// Waits says whether anything the pass deleted, or found being deleted, is
// still to be waited for.
func (p Pass) Waits() bool { return len(p.waitNamespaces)+len(p.waitObjects)+len(p.waitClaims) > 0 }

// Wait empties the namespaces the pass deleted, as kube-controller-manager
// would (emptyns.go says why reset does it itself), and waits within ctx
// until everything the pass deleted is gone. The emptying runs beside the
// wait: the wait says when everything is gone, whoever finished the
// namespaces; an emptying that fails while the wait succeeds is only noted.
func (p Pass) Wait(ctx context.Context, kc *kube.Clients, logger log.Logger) error {
	var emptyErr error
	var wg sync.WaitGroup
	wg.Go(func() { emptyErr = emptyNamespaces(ctx, kc, p.waitNamespaces, logger) })
	err := errors.Join(waitDeleted(ctx, kc, p.waitNamespaces, p.waitObjects), waitClaimsGone(ctx, kc.Typed, p.waitClaims))
	wg.Wait()
	if emptyErr != nil {
		if err != nil {
			return fmt.Errorf("%w\nreset's own emptying of the namespaces: %v", err, emptyErr)
		}
		logger.V(1).Infof("left the namespaces to kube-controller-manager: %v", emptyErr)
	}
	return err
}

// deletePass reads the cluster, plans against the baseline and deletes what
// the plan says. A type that could not be read fails the pass before
// anything is deleted: acting on part of the cluster would leave a lane
// that only looks reset.
func deletePass(ctx context.Context, kc *kube.Clients, b *Baseline, logger log.Logger) (resetPlan, []clusterObject, error) {
	st, err := readCluster(ctx, kc, systemType)
	if err != nil {
		return resetPlan{}, nil, err
	}
	p := planReset(b, st)
	if err := p.unreadableErr(); err != nil {
		return p, nil, err
	}
	for _, o := range p.Replaced {
		logger.V(1).Infof("keeping %s: it replaces the baseline's of that name", o)
	}
	deleted, err := deletePlanned(ctx, kc.Metadata, p, logger)
	return p, deleted, err
}

// deletePlanned deletes what p says, in its order, each only while it is
// still the object the plan saw (a UID precondition): one made again under
// the same name meanwhile is left to the next pass. It goes on past
// failures and returns them together with what it deleted.
//
// kube-apiserver learns that a webhook configuration is gone from an
// informer, a moment after the delete; until then it still calls the
// webhook, whose server reset may be deleting too. So when blockers were
// deleted, what failed after them is tried again for blockerGoneGrace.
func deletePlanned(ctx context.Context, md metadata.Interface, p resetPlan, logger log.Logger) ([]clusterObject, error) {
	var deleted []clusterObject
	background := metav1.DeletePropagationBackground
	try := func(o clusterObject) error {
		uid := o.UID
		err := md.Resource(o.gvr()).Delete(ctx, o.Name, metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: &uid},
		})
		switch {
		case err == nil:
			deleted = append(deleted, o)
			logger.V(1).Infof("deleted %s", o)
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			logger.V(1).Infof("%s changed since it was read; left to the next pass: %v", o, err)
		default:
			return fmt.Errorf("deleting %s: %w", o, err)
		}
		return nil
	}
	type failure struct {
		o   clusterObject
		err error
	}
	var failed []failure
	blockerDeleted := false
	for i, o := range p.deletes() {
		n := len(deleted)
		if err := try(o); err != nil {
			failed = append(failed, failure{o, err})
		}
		blockerDeleted = blockerDeleted || i < len(p.Blockers) && len(deleted) > n
		if ctx.Err() != nil {
			return deleted, ctx.Err()
		}
	}
	if len(failed) > 0 && blockerDeleted {
		// Tried again until none fails or the grace is over; what still
		// fails then is the pass's error.
		err := wait.PollUntilContextTimeout(ctx, resetPollInterval, blockerGoneGrace, false, func(context.Context) (bool, error) {
			still := failed[:0]
			for _, f := range failed {
				if err := try(f.o); err != nil {
					still = append(still, failure{f.o, err})
				}
			}
			failed = still
			return len(failed) == 0, nil
		})
		if err != nil && ctx.Err() != nil {
			return deleted, ctx.Err()
		}
	}
	var errs []error
	for _, f := range failed {
		errs = append(errs, f.err)
	}
	return deleted, errors.Join(errs...)
}

// blockerGoneGrace bounds how long deletes are tried again after the
// webhooks and APIServices that refused them were deleted: kube-apiserver's
// informers see a delete well within a second.
const blockerGoneGrace = 10 * time.Second
