package reset

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/apiserver"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// Against a real kube-apiserver without kube-controller-manager, only
// reset's own emptying can finish a namespace: it deletes pods first and
// nothing else while one remains, waits for finalizers on the content, and
// finalizes the namespace only once a list of every type finds nothing.
func TestEmptyNamespacesFinalizesOnlyEmptyNamespaces(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, kc := apiserver.ClientsForTest(t, kube.ForConfig)
	cs := kc.Typed
	ctx := t.Context()

	mkNamespace(t, cs, "job-a")
	mkNamespace(t, cs, "job-b")
	// job-a: plain content. job-b: a pod held by a finalizer, and a
	// ConfigMap that must outlive it.
	for _, ns := range []string{"job-a", "job-b"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Secrets("job-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller-manager makes the namespace's default ServiceAccount.
	if _, err := cs.CoreV1().ServiceAccounts("job-b").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const hold = "example.com/hold"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{hold}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods("job-b").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refs := map[string]objectRef{}
	for _, name := range []string{"job-a", "job-b"} {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		refs[name] = objectRef{Version: "v1", Resource: "namespaces", Name: name, UID: ns.UID}
	}

	// job-a empties and goes; job-b cannot while its pod is held. The
	// emptying is ended once job-a is gone and a whole round of job-b's
	// has returned: each round lists job-b's pods first and once
	// (deleteContentRound), so a second list means the first round is
	// over and its findings are what the error says. Ended on those
	// events, not at a time the machine's load decides.
	var podLists atomic.Int32
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/job-b/pods" {
				podLists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	ckc, err := kube.ForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		defer cancel()
		// The bound only says when to give up on a reset that never gets
		// there: the assertions below then name what is missing.
		ended <- wait.PollUntilContextTimeout(sctx, 50*time.Millisecond, bound.Scaled(2*time.Minute), true, func(ctx context.Context) (bool, error) {
			if podLists.Load() < 2 {
				return false, nil
			}
			_, err := cs.CoreV1().Namespaces().Get(ctx, "job-a", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}()
	err = emptyNamespaces(sctx, ckc, []objectRef{refs["job-a"], refs["job-b"]}, testLogger(t))
	cancel()
	if werr := <-ended; werr != nil && !wait.Interrupted(werr) {
		t.Errorf("watching the emptying: %v", werr)
	}
	if err == nil || !strings.Contains(err.Error(), "namespace job-b") || !strings.Contains(err.Error(), "1 pods (finalizers ["+hold+"])") {
		t.Errorf("emptying a namespace whose pod is held: %v, want it to name the held pod", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "job-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace job-a not gone after emptying: %v", err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "job-b", metav1.GetOptions{})
	if err != nil || len(ns.Spec.Finalizers) == 0 {
		t.Fatalf("namespace job-b finalized with a pod in it: %+v, %v", ns.Spec, err)
	}
	cm, err := cs.CoreV1().ConfigMaps("job-b").Get(ctx, "data", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp != nil {
		t.Errorf("ConfigMap in job-b deleted before its pod was gone: %v, %v", cm.DeletionTimestamp, err)
	}

	// A deadline too near for the client's rate limiter fails a round in
	// its list while ctx is not done yet; what the last whole round saw is
	// still said. A limiter of one token: the first round has it, the
	// second would wait 100 s and is refused at once.
	throttled := rest.CopyConfig(cfg)
	throttled.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(0.01, 1)
	tkc, err := kube.ForConfig(throttled)
	if err != nil {
		t.Fatal(err)
	}
	all, collection, err := namespacedTypes(ctx, kc.Discovery)
	if err != nil {
		t.Fatal(err)
	}
	// Not scaled: the limiter refuses a wait past the deadline, and its
	// next token is 100 s away.
	sctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	start := time.Now()
	err = emptyNamespace(sctx, tkc, refs["job-b"], all, collection, testLogger(t))
	cancel()
	if err == nil || !strings.Contains(err.Error(), "rate limiter") || !strings.Contains(err.Error(), "left: 1 pods (finalizers ["+hold+"])") {
		t.Errorf("a round refused by the rate limiter: %v, want the limiter's error and what the last round left", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refused round took %s: the limiter waited instead of refusing", d)
	}

	// Once the pod's finalizer goes, so do the rest and the namespace.
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cs.CoreV1().Pods("job-b").Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel = context.WithTimeout(ctx, bound.Scaled(20*time.Second))
	defer cancel()
	if err := emptyNamespaces(sctx, kc, []objectRef{refs["job-b"]}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if err := waitNamespacesGone(sctx, cs, []objectRef{refs["job-b"]}); err != nil {
		t.Error(err)
	}

	// A namespace made again under the name is not reset's to finalize.
	mkNamespace(t, cs, "job-a")
	if err := finalizeNamespace(ctx, kc, refs["job-a"]); err != nil {
		t.Fatal(err)
	}
	again, err := cs.CoreV1().Namespaces().Get(ctx, "job-a", metav1.GetOptions{})
	if err != nil || again.DeletionTimestamp != nil || len(again.Spec.Finalizers) == 0 {
		t.Errorf("the new job-a was touched: %+v, %v", again, err)
	}
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
