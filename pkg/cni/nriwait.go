package cni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// nriProbeNetwork is the network the serving probe's pod names: a
// NetworkAttachmentDefinition nobody makes, so an injector that is reached
// refuses the pod.
const nriProbeNetwork = "sriov-lane-injector-probe"

// WaitInjectorServing waits, when objs hold the injector's webhook, until
// kube-apiserver reaches the injector. An Available Deployment is not
// enough: the API server calls the webhook at its Service's ClusterIP, and
// until kube-proxy on the server has the endpoints, a call fails and
// failurePolicy Ignore admits the pod without its VF resources. The probe
// is a dry-run pod (the webhook has no side effects, so it is called for
// those) naming a network that does not exist, which a reached injector
// refuses (network-resources-injector pkg/webhook/webhook.go@v1.9.0,
// parseNetworkAttachDefinition: "could not find network attachment
// definition"), with the API server's "admission webhook %q denied the
// request" (k8s.io/apiserver pkg/admission/plugin/webhook/errors/statuserror.go@v0.36.3).
func WaitInjectorServing(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "MutatingWebhookConfiguration" && o.GetName() == NRIWebhookConfig
	}) {
		return nil
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: nriProbeNetwork, Namespace: metav1.NamespaceDefault,
			Annotations: map[string]string{nadv1.NetworkAttachmentAnnot: nriProbeNetwork}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	denied := fmt.Sprintf("admission webhook %q denied the request", nriWebhookName)
	var last error
	for {
		_, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil && strings.Contains(err.Error(), denied):
			return nil
		case err == nil:
			last = errors.New("a pod naming a network was admitted unchanged: the injector is not reached yet")
		case ctx.Err() != nil && last != nil:
			// The deadline cut this probe short: what the one before saw
			// says more than "context deadline exceeded".
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver does not reach network-resources-injector (Service %s/%s): %w; last probe: %v", NRINamespace, NRIService, ctx.Err(), last)
		case <-time.After(nriProbeInterval):
		}
	}
}

// nriProbeInterval is how often the serving probe asks again: each is one
// dry-run create.
var nriProbeInterval = 200 * time.Millisecond
