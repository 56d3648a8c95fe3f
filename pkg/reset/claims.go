package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// jobClaim is a ResourceClaim or ResourceClaimTemplate a job made in a
// namespace reset keeps.
type jobClaim struct {
	kind, namespace, name string
	uid                   types.UID
}

func (c jobClaim) String() string { return c.kind + " " + c.namespace + "/" + c.name }

// madeSince is whether an object's creation is at or after the baseline's
// recording: creation timestamps have whole seconds.
func madeSince(created metav1.Time, recorded time.Time) bool {
	return !created.Time.Before(recorded.Truncate(time.Second))
}

// deleteJobClaims deletes, in the namespaces reset keeps (default, and
// those of the baseline), the ResourceClaimTemplates and the
// ResourceClaims made since the baseline, but for claims made for a pod:
// those go with their pod, and reset leaves a kept namespace's pods as
// they are. An allocated claim holds its device (a VF of a dra lane)
// from the next job, which a claim left in default would. A cluster
// without the resource.k8s.io/v1 API has none.
func deleteJobClaims(ctx context.Context, cs kubernetes.Interface, namespaces []string, recorded time.Time, logger log.Logger) ([]jobClaim, error) {
	var found []jobClaim
	for _, ns := range namespaces {
		tmpls, err := cs.ResourceV1().ResourceClaimTemplates(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing ResourceClaimTemplates in %s: %w", ns, err)
		}
		for _, t := range tmpls.Items {
			if madeSince(t.CreationTimestamp, recorded) {
				found = append(found, jobClaim{"ResourceClaimTemplate", ns, t.Name, t.UID})
			}
		}
		claims, err := cs.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing ResourceClaims in %s: %w", ns, err)
		}
		for _, c := range claims.Items {
			podOwned := slices.ContainsFunc(c.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Pod" })
			if madeSince(c.CreationTimestamp, recorded) && !podOwned {
				found = append(found, jobClaim{"ResourceClaim", ns, c.Name, c.UID})
			}
		}
	}
	var deleted []jobClaim
	var errs []error
	for _, c := range found {
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.uid}}
		var err error
		if c.kind == "ResourceClaim" {
			err = cs.ResourceV1().ResourceClaims(c.namespace).Delete(ctx, c.name, opts)
		} else {
			err = cs.ResourceV1().ResourceClaimTemplates(c.namespace).Delete(ctx, c.name, opts)
		}
		switch {
		case err == nil:
			deleted = append(deleted, c)
			logger.V(1).Infof("deleted %s", c)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("deleting %s: %w", c, err))
		}
	}
	return deleted, errors.Join(errs...)
}

// waitClaimsGone waits until each deleted claim is gone: its allocation
// released (kube-controller-manager drops the claim's finalizer once no
// pod holds it).
func waitClaimsGone(ctx context.Context, cs kubernetes.Interface, claims []jobClaim) error {
	var left []string
	err := wait.PollUntilContextCancel(ctx, resetPollInterval, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, c := range claims {
			if c.kind != "ResourceClaim" {
				continue
			}
			got, err := cs.ResourceV1().ResourceClaims(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
			if err == nil && got.UID == c.uid {
				left = append(left, c.String())
			} else if err != nil && !apierrors.IsNotFound(err) {
				left = append(left, c.String()+" ("+err.Error()+")")
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for deleted claims to be gone (%v left): %w", left, err)
	}
	return nil
}
