package cni

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
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

// injectorProbeNetwork is the network the serving probe's pod names: a
// NetworkAttachmentDefinition nobody makes, so an injector that is reached
// refuses the pod.
const injectorProbeNetwork = "sriov-lane-injector-probe"

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
		return o.GetKind() == "MutatingWebhookConfiguration" && o.GetName() == InjectorWebhookConfig
	}) {
		return nil
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: injectorProbeNetwork, Namespace: metav1.NamespaceDefault,
			Annotations: map[string]string{nadv1.NetworkAttachmentAnnot: injectorProbeNetwork}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	denied := fmt.Sprintf("admission webhook %q denied the request", injectorWebhookName)
	var last error
	// The interval runs from the end of each probe, not on a fixed tick:
	// at 200 ms a fixed tick is the client's default 5 QPS exactly, and its
	// rate limiter would then refuse the last probe before the deadline
	// ("would exceed context deadline"), hiding what the probes saw.
	paced := wait.Backoff{Duration: injectorProbeInterval, Steps: math.MaxInt32}
	err := wait.ExponentialBackoffWithContext(ctx, paced, func(ctx context.Context) (bool, error) {
		start := time.Now()
		_, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil && strings.Contains(err.Error(), denied):
			return true, nil
		case err == nil:
			// How long the API server took tells failures apart: about
			// the webhook's timeout (10 s, the v1 default: k8s.io/api
			// admissionregistration/v1/types.go@v0.37.2 TimeoutSeconds)
			// when the call hung (packets dropped on the way, or an
			// injector whose own API calls hang), well under it when the
			// connection was refused or the certificate rejected.
			last = fmt.Errorf("a pod naming a network was admitted unchanged after %s: the injector is not reached yet", time.Since(start).Round(10*time.Millisecond))
		case last != nil && (ctx.Err() != nil || strings.Contains(err.Error(), rateLimiterDeadline)):
			// The deadline cut this probe short, or the client's rate
			// limiter refused to wait past it: what the probe before saw
			// says more than either.
		default:
			last = err
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver does not reach network-resources-injector (Service %s/%s): %w; last probe: %v", InjectorNamespace, InjectorService, err, last)
	}
	return nil
}

// rateLimiterDeadline is how the client's rate limiter refuses a request
// whose token would come after the context's deadline; it wraps no
// context error (golang.org/x/time rate/rate.go@v0.15.0 Limiter.wait,
// behind client-go's "client rate limiter Wait returned an error",
// k8s.io/client-go rest/request.go@v0.37.2 tryThrottleWithInfo).
const rateLimiterDeadline = "would exceed context deadline"

// injectorProbeInterval is how often the serving probe asks again: each is one
// dry-run create, and kube-proxy programs the Service within a second or
// two of its endpoints.
const injectorProbeInterval = 200 * time.Millisecond
