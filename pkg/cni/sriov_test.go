package cni

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/test/bound"
)

// createDevicePluginDaemonSet creates the lane's device plugin DaemonSet in
// the API server of cs, with no controller to start its pods: each test
// makes the pods a kubelet would.
func createDevicePluginDaemonSet(t *testing.T, cs kubernetes.Interface) *appsv1.DaemonSet {
	t.Helper()
	objs, err := Objects(t.Context(), defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", devicePluginDaemonSet, &ds)
	if _, err := cs.AppsV1().DaemonSets(DefaultNamespace).Create(t.Context(), &ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ensureDefaultServiceAccount(t, cs, DefaultNamespace)
	return &ds
}

// deletePluginPods deletes the device plugin's pods on the node it is
// given, found by the DaemonSet's own selector and the pods' node, and
// nothing else: not the plugin on other nodes, not other pods there.
func TestDeletePluginPods(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	ctx := t.Context()
	ds := createDevicePluginDaemonSet(t, cs)
	pod := func(name, node string, labels map[string]string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		if _, err := cs.CoreV1().Pods(DefaultNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("dp-a", "agent-a", ds.Spec.Template.Labels)
	pod("dp-b", "agent-b", ds.Spec.Template.Labels)
	pod("other-a", "agent-a", map[string]string{"app": "other"})

	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	gone, err := deletePluginPods(ctx, cs, DefaultNamespace, sel, "agent-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 {
		t.Errorf("deleted UIDs %v, want the one of dp-a", gone)
	}
	// No kubelet runs here: a deleted pod stays, terminating.
	deleted := func(name string) bool {
		p, err := cs.CoreV1().Pods(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		return p.DeletionTimestamp != nil
	}
	if !deleted("dp-a") {
		t.Error("the device plugin's pod on agent-a was not deleted")
	}
	for _, name := range []string{"dp-b", "other-a"} {
		if deleted(name) {
			t.Errorf("pod %s was deleted", name)
		}
	}
	if gone, err := deletePluginPods(ctx, cs, DefaultNamespace, sel, "agent-c"); err != nil || len(gone) != 0 {
		t.Errorf("a node without the plugin: deleted %v, %v", gone, err)
	}
}

// waitPluginsRestarted counts only a pod that is new (not one it was
// told was deleted), not terminating and Ready, and returns no sooner
// than KubeletStatusSettle after that pod became Ready: before that the
// Node may still show the allocatable of before the restart.
func TestWaitPluginsRestarted(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	ctx := t.Context()
	ds := createDevicePluginDaemonSet(t, cs)
	// pod makes a device plugin pod on node, Ready since readySince when
	// that is set; a kubelet's part, as none runs here.
	pod := func(name, node string, readySince time.Time) *corev1.Pod {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: ds.Spec.Template.Labels,
				Finalizers: []string{"sriov-lane.test/hold"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		p, err := cs.CoreV1().Pods(DefaultNamespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = cs.CoreV1().Pods(DefaultNamespace).Patch(context.Background(), name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		if readySince.IsZero() {
			return p
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(readySince)}}
		if p, err = cs.CoreV1().Pods(DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := time.Now().Add(-time.Hour)
	old := pod("dp-old", "agent-a", long)
	// The deleted pod stays, terminating and Ready, as it does while its
	// kubelet stops it.
	if err := cs.CoreV1().Pods(DefaultNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	unready := pod("dp-unready", "agent-a", time.Time{})
	stale := pod("dp-stale", "agent-b", long) // deleted but somehow not terminating: still the old plugin
	deleted := map[string][]types.UID{"agent-a": {old.UID}, "agent-b": {stale.UID}}

	short, cancel := context.WithTimeout(ctx, bound.Scaled(2*time.Second))
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	err := waitPluginsRestarted(short, cs, DefaultNamespace, sel, deleted, KubeletStatusSettle)
	cancel()
	if err == nil {
		t.Fatalf("returned with only the deleted pods (one terminating) and %s not Ready", unready.Name)
	}
	for _, want := range []string{"agent-a", "agent-b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}

	// New pods, Ready long ago on agent-a and a second before the settle
	// ends on agent-b: it waits for the later one.
	pod("dp-new-a", "agent-a", long)
	readyB := time.Now().Add(-KubeletStatusSettle + 3*time.Second)
	pod("dp-new-b", "agent-b", readyB)
	if err := waitPluginsRestarted(ctx, cs, DefaultNamespace, sel, deleted, KubeletStatusSettle); err != nil {
		t.Fatal(err)
	}
	// The API server keeps the condition's time to the second: compare
	// with a second's slack.
	if early := time.Until(readyB.Add(KubeletStatusSettle - time.Second)); early > 0 {
		t.Errorf("returned %s before one kubelet sync after agent-b's new plugin was Ready", early)
	}
}
