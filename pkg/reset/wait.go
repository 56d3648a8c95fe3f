package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// resetPollInterval is how often the waits look again: a namespace with
// nothing in it goes within a second or two, and each look is one list.
const resetPollInterval = 100 * time.Millisecond

// waitDeleted waits, both at once and within ctx, until the namespaces and
// the objects are gone.
func waitDeleted(ctx context.Context, kc *kube.Clients, namespaces, objects []objectRef) error {
	var wg sync.WaitGroup
	var nsErr, objErr error
	wg.Go(func() { nsErr = waitNamespacesGone(ctx, kc.Typed, namespaces) })
	wg.Go(func() { objErr = waitObjectsGone(ctx, kc.Metadata, objects) })
	wg.Wait()
	return errors.Join(nsErr, objErr)
}

// waitNamespacesGone waits until none of namespaces exists any more (by
// UID: one made again under its name does not count). When ctx ends first,
// the error names each one left with its phase, finalizers and the
// namespace controller's conditions, which say what content holds it.
func waitNamespacesGone(ctx context.Context, cs kubernetes.Interface, namespaces []objectRef) error {
	if len(namespaces) == 0 {
		return nil
	}
	start := time.Now()
	want := map[types.UID]bool{}
	for _, ns := range namespaces {
		want[ns.UID] = true
	}
	var left []corev1.Namespace
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, resetPollInterval, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				lastErr = err
			}
			return false, nil
		}
		left = left[:0]
		for _, ns := range list.Items {
			if want[ns.UID] {
				left = append(left, ns)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return namespacesLeft(namespaces, left, time.Since(start), ctx.Err(), lastErr)
	}
	return nil
}

func namespacesLeft(asked []objectRef, left []corev1.Namespace, waited time.Duration, why, lastErr error) error {
	var b strings.Builder
	if left == nil {
		// Never listed: all of them, as far as anyone can tell.
		for _, ns := range asked {
			left = append(left, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}})
		}
	}
	fmt.Fprintf(&b, "%d namespace(s) still there after %s (%v):", len(left), waited.Round(time.Second), why)
	for _, ns := range left {
		fmt.Fprintf(&b, "\n  namespace %s: %s", ns.Name, namespaceState(ns))
	}
	if lastErr != nil {
		fmt.Fprintf(&b, "\n  last error listing namespaces: %v", lastErr)
	}
	b.WriteString("\na finalizer whose controller went with its namespace holds them; see 'kubectl get ns NAME -o yaml', run reset again with a longer --timeout, or down and up")
	return errors.New(b.String())
}

// namespaceState is what keeps a namespace: its phase, the finalizers left
// and the namespace controller's conditions that are true.
func namespaceState(ns corev1.Namespace) string {
	var parts []string
	if ns.Status.Phase != "" {
		parts = append(parts, string(ns.Status.Phase))
	}
	var fins []string
	for _, f := range ns.Spec.Finalizers {
		fins = append(fins, string(f))
	}
	fins = append(fins, ns.Finalizers...)
	if len(fins) > 0 {
		parts = append(parts, fmt.Sprintf("finalizers %v", fins))
	}
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	if len(parts) == 0 {
		return "state unknown"
	}
	return strings.Join(parts, "; ")
}

// waitObjectsGone waits until none of objs exists any more (by UID),
// listing each of their types once a round. When ctx ends first, the error
// names each one left with its finalizers.
func waitObjectsGone(ctx context.Context, md metadata.Interface, objs []objectRef) error {
	if len(objs) == 0 {
		return nil
	}
	start := time.Now()
	left := slices.Clone(objs)
	state := map[types.UID]string{}
	err := wait.PollUntilContextCancel(ctx, resetPollInterval, true, func(ctx context.Context) (bool, error) {
		byType := map[schema.GroupVersionResource][]objectRef{}
		for _, o := range left {
			byType[o.gvr()] = append(byType[o.gvr()], o)
		}
		var still []objectRef
		for gvr, want := range byType {
			list, err := md.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				// The type itself is gone (a CRD's custom resources).
				continue
			}
			if err != nil {
				still = append(still, want...)
				if ctx.Err() == nil {
					for _, o := range want {
						state[o.UID] = "cannot tell: " + err.Error()
					}
				}
				continue
			}
			now := map[types.UID]metav1.PartialObjectMetadata{}
			for _, it := range list.Items {
				now[it.UID] = it
			}
			for _, o := range want {
				m, ok := now[o.UID]
				if !ok {
					continue
				}
				still = append(still, o)
				state[o.UID] = fmt.Sprintf("being deleted, finalizers %v", m.Finalizers)
				if m.DeletionTimestamp == nil {
					state[o.UID] = "not being deleted"
				}
			}
		}
		left = still
		return len(left) == 0, nil
	})
	if err == nil {
		return nil
	}
	slices.SortFunc(left, func(a, b objectRef) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) still there after %s (%v):", len(left), time.Since(start).Round(time.Second), ctx.Err())
	for _, o := range left {
		s := state[o.UID]
		if s == "" {
			s = "state unknown"
		}
		fmt.Fprintf(&b, "\n  %s: %s", o, s)
	}
	return errors.New(b.String())
}
