package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/docexample"
)

// checkReset does what a CI job does to a lane (a namespace with a running
// pod and a ConfigMap, a ClusterRole), then resets it: the job's objects,
// and whatever earlier checks on the lane made, are gone; every namespace
// and ClusterRole the lane had after up (before, taken then) is still
// there under the same UID, and status is healthy with every agent's VFs
// allocatable. Reset empties the namespace itself (its pod through
// kubelet's termination) rather than wait out the namespace controller's
// fixed 5 s. madeBefore is how many namespaces earlier checks made.
func checkReset(t *testing.T, l *lane, cs kubernetes.Interface, before map[string]types.UID, madeBefore int) {
	t.Helper()
	ctx := t.Context()
	// What a job makes.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "job-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("job-1").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "job-reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "job-1"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "c", Image: cni.MirrorImage(l.cfg.ImageRegistryMirror, cni.SmokeImage), Command: []string{"sleep", "3600"}}},
		},
	}
	waitDefaultServiceAccount(t, cs, "job-1")
	if _, err := cs.CoreV1().Pods("job-1").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lastStatus corev1.PodStatus // the job's pod's status at the last Get
	var lastErr error               // and that Get's error
	if err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, bound.Scaled(90*time.Second), true, func(context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("job-1").Get(ctx, "worker", metav1.GetOptions{})
		lastStatus, lastErr = p.Status, err
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the job's pod is not Running after 90 s: %v %v", lastStatus, lastErr)
	}

	start := time.Now()
	res := l.example(t, docexample.Lookup(t, "sriov-lane reset --name sriov -v"))
	if res.code != 0 {
		t.Fatal("reset failed")
	}
	t.Logf("reset took %s:\n%s", time.Since(start), res.output)
	for _, step := range []string{"delete what up did not make", "wait for deletions", "delete what came back", "check PFs and VFs", "wait for VFs"} {
		if !strings.Contains(res.output, "✓ "+step+" (") {
			t.Errorf("no progress line with duration for %q", step)
		}
	}
	if !strings.Contains(res.output, "namespace job-1 emptied and finalized in ") {
		t.Errorf("reset left the namespace to kube-controller-manager:\n%s", res.output)
	}
	if want := fmt.Sprintf("lane %s reset (deleted %d namespace(s) and 1 cluster-scoped object(s))", l.cfg.Name, 1+madeBefore); !strings.Contains(res.output, want) {
		t.Errorf("reset does not say what it deleted:\n%s", res.output)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "job-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace job-1 still there after reset: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("job-1").Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap job-1/data still there after reset: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "job-reader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole job-reader still there after reset: %v", err)
	}
	after := laneObjects(t, cs)
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("the lane's %s: UID %q after reset, %q before", name, after[name], uid)
		}
	}

	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Errorf("status after reset: exit %d\n%s", res.code, res.output)
	}
	// Nothing new since: a second reset deletes nothing.
	if res := run(t, nil, "reset", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "nothing to delete") {
		t.Errorf("second reset: exit %d\n%s", res.code, res.output)
	}
}

// laneObjects is every namespace and ClusterRole, by kind and name, with
// its UID.
func laneObjects(t *testing.T, cs kubernetes.Interface) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	nss, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		out["namespace "+ns.Name] = ns.UID
	}
	crs, err := cs.RbacV1().ClusterRoles().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs.Items {
		out["ClusterRole "+cr.Name] = cr.UID
	}
	return out
}
