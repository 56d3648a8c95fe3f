package cni

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestartDevicePlugin deletes the device plugin's pods on the node it is
// given, found by the DaemonSet's own selector and the pods' node, and
// nothing else: not the plugin on other nodes, not other pods there.
func TestRestartDevicePlugin(t *testing.T) {
	_, cs := startAPI(t)
	ctx := t.Context()
	objs, err := Objects(ctx, defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", devicePluginDaemonSet, &ds)
	if _, err := cs.AppsV1().DaemonSets(DefaultNamespace).Create(ctx, &ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ensureDefaultServiceAccount(t, cs, DefaultNamespace)
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

	if err := RestartDevicePlugin(ctx, cs, "agent-a"); err != nil {
		t.Fatal(err)
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
	if err := RestartDevicePlugin(ctx, cs, "agent-c"); err != nil {
		t.Errorf("a node without the plugin: %v", err)
	}
}
