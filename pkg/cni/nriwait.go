package cni

import (
	"context"
	"fmt"

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
	return waitRollout(ctx, cs, workload[*appsv1.Deployment]{
		kind:    "Deployment",
		example: &appsv1.Deployment{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.AppsV1().Deployments(metav1.NamespaceAll).Watch(ctx, o)
		},
		get: func(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
			return cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		key:      func(d *appsv1.Deployment) nsName { return nsName{d.Namespace, d.Name} },
		selector: func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector },
		pending:  deploymentPending,
	}, objs)
}

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
