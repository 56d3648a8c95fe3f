package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/log"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// Reset empties the namespaces it deletes itself instead of leaving them to
// kube-controller-manager's namespace controller, which waits a fixed 5 s
// after every namespace event before it starts
// (kubernetes pkg/controller/namespace/namespace_controller.go@v1.36.3,
// namespaceDeletionGracePeriod): most of a reset, for a namespace with a
// ConfigMap in it. The wait is there for HA API servers that have not yet
// seen the namespace terminate; a lane has one. What reset does is what the
// controller's deleter does (pkg/controller/namespace/deletion/
// namespaced_resources_deleter.go@v1.36.3): pods first and alone
// (OrderedNamespaceDeletion), then a background-propagated DeleteCollection
// of every namespaced type that can be deleted, and only when a list of
// each finds nothing, the namespace's "kubernetes" finalizer is removed
// through the finalize subresource. Pods still go through kubelet's
// graceful termination and finalizers on content are waited for, so
// nothing is finalized away. If the content cannot be known (a type's
// discovery or list fails), reset leaves the namespace to the controller.

// namespaceFinalizer is the spec finalizer kube-apiserver gives every
// namespace and the namespace controller removes (core/v1 FinalizerKubernetes).
const namespaceFinalizer = "kubernetes"

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// errContentUnknown says a namespace's content could not all be read, so it
// is not reset's to finalize.
var errContentUnknown = errors.New("namespace content cannot all be read")

// namespacedTypes are the namespaced types that can be deleted, pods first,
// with whether each takes a DeleteCollection. A discovery that failed for
// any group is errContentUnknown: emptying part of a namespace and
// finalizing it would leave the rest in etcd without a namespace.
func namespacedTypes(ctx context.Context, disc *discovery.DiscoveryClient) ([]resourceType, map[schema.GroupVersionResource]bool, error) {
	lists, err := disc.ServerPreferredNamespacedResourcesWithContext(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: discovering namespaced types: %v", errContentUnknown, err)
	}
	var all []resourceType
	collection := map[schema.GroupVersionResource]bool{}
	for _, rl := range lists {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errContentUnknown, err)
		}
		for _, r := range rl.APIResources {
			if !slices.Contains(r.Verbs, "delete") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			all = append(all, resourceType{gvr: gvr, kind: r.Kind})
			collection[gvr] = slices.Contains(r.Verbs, "deletecollection")
		}
	}
	slices.SortStableFunc(all, func(a, b resourceType) int {
		switch {
		case a.gvr.GroupResource() == podsGVR.GroupResource():
			return -1
		case b.gvr.GroupResource() == podsGVR.GroupResource():
			return 1
		}
		return 0
	})
	return all, collection, nil
}

// emptyNamespaces empties each namespace (deleted already, so admission
// refuses new content in it) and finalizes it once nothing is left. It
// returns when every one is finalized, or with ctx's end, or with
// errContentUnknown; the caller's wait for the namespaces to be gone is
// the judge either way.
func emptyNamespaces(ctx context.Context, kc *kube.Clients, namespaces []objectRef, logger log.Logger) error {
	if len(namespaces) == 0 {
		return nil
	}
	typesList, collection, err := namespacedTypes(ctx, kc.Discovery)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(namespaces))
	for i, ns := range namespaces {
		wg.Go(func() {
			errs[i] = emptyNamespace(ctx, kc, ns, typesList, collection, logger)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// emptyNamespace deletes ns's content round after round until a list of
// every type finds none, then removes the namespace's finalizer.
func emptyNamespace(ctx context.Context, kc *kube.Clients, ns objectRef, all []resourceType, collection map[schema.GroupVersionResource]bool, logger log.Logger) error {
	start := time.Now()
	var seen []string // what the last whole round found left
	var roundErr error
	err := wait.PollUntilContextCancel(ctx, resetPollInterval, true, func(context.Context) (bool, error) {
		left, err := deleteContentRound(ctx, kc, ns.Name, all, collection)
		if err != nil {
			roundErr = err
			return false, err
		}
		seen = left
		return len(left) == 0, nil
	})
	if err != nil {
		// A round cut short by the deadline fails in a list, not in ctx:
		// client-go's rate limiter refuses a wait that would pass the
		// deadline before ctx is done (golang.org/x/time rate/rate.go
		// Limiter.wait@v0.15.0: an unwrapped "would exceed context
		// deadline", wrapped as "client rate limiter Wait returned an
		// error" in k8s.io/client-go rest/request.go@v0.37.2).
		// So the cause is ctx's end once ctx is done, the round's error
		// otherwise, and what the last whole round saw left is said
		// either way.
		cause := roundErr
		if cause == nil || ctx.Err() != nil {
			cause = ctx.Err()
		}
		err = fmt.Errorf("emptying namespace %s: %w", ns.Name, cause)
		if seen != nil {
			err = fmt.Errorf("%w; left: %s", err, strings.Join(seen, ", "))
		}
		return err
	}
	if err := finalizeNamespace(ctx, kc, ns); err != nil {
		return err
	}
	logger.V(1).Infof("namespace %s emptied and finalized in %s", ns.Name, time.Since(start).Round(time.Millisecond))
	return nil
}

// deleteContentRound lists every type in the namespace (pods alone first:
// nothing else is deleted while a pod remains, as the controller does) and
// deletes what is not being deleted yet. It returns what is left, as
// "<n> <resource> (finalizers ...)".
func deleteContentRound(ctx context.Context, kc *kube.Clients, ns string, all []resourceType, collection map[schema.GroupVersionResource]bool) ([]string, error) {
	rest := all
	if len(all) > 0 && all[0].gvr.GroupResource() == podsGVR.GroupResource() {
		if left, err := deleteContentOf(ctx, kc, ns, all[:1], collection); err != nil || len(left) > 0 {
			return left, err
		}
		rest = all[1:]
	}
	return deleteContentOf(ctx, kc, ns, rest, collection)
}

// deleteContentOf lists the types in ns at once (a few at a time) and
// deletes what is there and not yet being deleted.
func deleteContentOf(ctx context.Context, kc *kube.Clients, ns string, typesList []resourceType, collection map[schema.GroupVersionResource]bool) ([]string, error) {
	background := metav1.DeletePropagationBackground
	var (
		mu   sync.Mutex
		left []string
		errs []error
		// Each type's error is kept in errs, not returned: one failing
		// type must not stop the others.
		lists errgroup.Group
	)
	lists.SetLimit(listWorkers)
	for _, t := range typesList {
		lists.Go(func() error {
			res := kc.Metadata.Resource(t.gvr).Namespace(ns)
			list, err := res.List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				// Served in discovery without a list (the controller
				// special-cases these too), or a CRD gone meanwhile.
				return nil
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%w: listing %s: %v", errContentUnknown, t.gvr.GroupResource(), err))
				mu.Unlock()
				return nil
			}
			if len(list.Items) == 0 {
				return nil
			}
			var fins []string
			var live []types.UID
			for _, it := range list.Items {
				fins = append(fins, it.Finalizers...)
				if it.DeletionTimestamp == nil {
					live = append(live, it.UID)
				}
			}
			var derr error
			if len(live) > 0 {
				if collection[t.gvr] {
					derr = res.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
				} else {
					for _, it := range list.Items {
						if it.DeletionTimestamp != nil {
							continue
						}
						uid := it.UID
						if err := res.Delete(ctx, it.Name, metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
							derr = err
						}
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if derr != nil && !apierrors.IsNotFound(derr) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", t.gvr.GroupResource(), derr))
			}
			s := fmt.Sprintf("%d %s", len(list.Items), t.gvr.GroupResource())
			if len(fins) > 0 {
				slices.Sort(fins)
				s += fmt.Sprintf(" (finalizers %v)", slices.Compact(fins))
			}
			left = append(left, s)
			return nil
		})
	}
	// nil while every list keeps its own error; one returned is not lost.
	if err := lists.Wait(); err != nil {
		errs = append(errs, err)
	}
	sort.Strings(left)
	return left, errors.Join(errs...)
}

// finalizeNamespace removes the namespace finalizer from ns, still the
// namespace reset deleted (by UID) and still being deleted; one gone
// already is done.
func finalizeNamespace(ctx context.Context, kc *kube.Clients, ref objectRef) error {
	nsc := kc.Typed.CoreV1().Namespaces()
	for {
		ns, err := nsc.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("finalizing namespace %s: %w", ref.Name, err)
		}
		if ns.UID != ref.UID {
			return nil
		}
		if ns.DeletionTimestamp == nil {
			return fmt.Errorf("finalizing namespace %s: it is not being deleted", ref.Name)
		}
		if !slices.Contains(ns.Spec.Finalizers, namespaceFinalizer) {
			return nil
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == namespaceFinalizer })
		_, err = nsc.Finalize(ctx, ns, metav1.UpdateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			// The namespace controller updated its conditions meanwhile.
			continue
		default:
			return fmt.Errorf("finalizing namespace %s: %w", ref.Name, err)
		}
	}
}
