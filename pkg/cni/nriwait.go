package cni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// WaitDeployments waits until every Deployment among objs has rolled out
// (kubectl rollout status semantics: the controller observed its
// generation, every replica is updated, no old replica is left, every
// updated replica is available). Today that is the injector's, whose
// webhook admits pods only once it is Available.
func WaitDeployments(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	var want []nsName
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GroupVersionKind().Group == "apps" {
			want = append(want, nsName{u.GetNamespace(), u.GetName()})
		}
	}
	if len(want) == 0 {
		return nil
	}
	pending := map[nsName]string{}
	lw := listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.AppsV1().Deployments(metav1.NamespaceAll).Watch(ctx, o)
	})
	err := watchUntil(ctx, lw, &appsv1.Deployment{}, func(items []any) (bool, error) {
		have := map[nsName]*appsv1.Deployment{}
		for _, o := range items {
			d := o.(*appsv1.Deployment)
			have[nsName{d.Namespace, d.Name}] = d
		}
		clear(pending)
		for _, k := range want {
			if why := deploymentPending(have[k]); why != "" {
				pending[k] = why
			}
		}
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	dctx, cancel := diagnoseContext(ctx)
	defer cancel()
	keys := make([]nsName, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nsName) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	fmt.Fprintf(&b, "waiting for %d Deployments to roll out: %v\n", len(want), err)
	for _, k := range keys {
		fmt.Fprintf(&b, "deployment %s: %s\n", k, pending[k])
		writeEvents(dctx, &b, cs, "Deployment", k.ns, k.name, "  ")
		d, gerr := cs.AppsV1().Deployments(k.ns).Get(dctx, k.name, metav1.GetOptions{})
		if gerr != nil || d.Spec.Selector == nil {
			continue
		}
		sel, serr := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if serr != nil {
			continue
		}
		writeUnreadyPods(dctx, &b, cs, k.ns, metav1.ListOptions{LabelSelector: sel.String()}, "  ")
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// deploymentPending says why d has not rolled out, or "" when it has.
func deploymentPending(d *appsv1.Deployment) string {
	if d == nil {
		return "not found"
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation {
		return fmt.Sprintf("generation %d not yet observed by the controller (observed %d)", d.Generation, s.ObservedGeneration)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas {
		return fmt.Sprintf("replicas %d, updated %d, total %d, ready %d, available %d", want, s.UpdatedReplicas, s.Replicas, s.ReadyReplicas, s.AvailableReplicas)
	}
	return ""
}
