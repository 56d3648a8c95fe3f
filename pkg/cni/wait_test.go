package cni

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// deadline is short: a failing wait must give up on time, with its diagnosis.
const failDeadline = 2 * time.Second

// assertFailsInTime runs wait with failDeadline and checks it failed within
// the deadline plus the product's own bound on gathering diagnostics, with
// all of want in the error text.
func assertFailsInTime(t *testing.T, wait func(ctx context.Context) error, want ...string) {
	t.Helper()
	_ = failsInTime(t, wait, want...)
}

// failsInTime is assertFailsInTime returning the wait's error, for checks
// of what it must not say.
func failsInTime(t *testing.T, wait func(ctx context.Context) error, want ...string) error {
	t.Helper()
	deadline := bound.Scaled(failDeadline)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	err := wait(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatal("wait succeeded; want failure")
	}
	// The product gives a failed wait diagnoseTimeout past its deadline to
	// say why, and no more; the last read can end just after it.
	if bound := deadline + diagnoseTimeout + time.Second; took > bound {
		t.Errorf("wait took %s with a %s deadline, over the %s its diagnosis may add", took, deadline, diagnoseTimeout)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	t.Logf("diagnosis as CI would print it:\n%v", err)
	return err
}

// runWait starts wait in the background and returns its result channel.
func runWait(t *testing.T, wait func(ctx context.Context) error) <-chan error {
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(30*time.Second))
	done := make(chan error, 1)
	go func() { defer cancel(); done <- wait(ctx) }()
	return done
}

func expectPending(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("wait returned before the condition held: %v", err)
	case <-time.After(bound.Scaled(500 * time.Millisecond)):
	}
}

func expectDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound.Scaled(20 * time.Second)):
		t.Fatal("wait did not notice the change")
	}
}

func TestWaitNodesReady(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	createNode(t, cs, "agent-0")
	createNode(t, cs, "agent-1")
	done := runWait(t, func(ctx context.Context) error { return WaitNodesReady(ctx, cs, []string{"agent-0", "agent-1"}) })
	setNodeStatus(t, cs, "agent-0", corev1.ConditionTrue, "KubeletReady", "ok", nil)
	expectPending(t, done) // agent-1 still has no Ready condition
	setNodeStatus(t, cs, "agent-1", corev1.ConditionTrue, "KubeletReady", "ok", nil)
	expectDone(t, done)

	createNode(t, cs, "agent-stuck")
	setNodeStatus(t, cs, "agent-stuck", corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: cni plugin not initialized", nil)
	createEvent(t, cs, "Node", "", "agent-stuck", "NodeNotReady", "sriov-lane-test: node agent-stuck stopped posting status")
	// What holds agent-stuck back: its Flannel pod cannot pull its image.
	// A pod elsewhere that is not Ready either is not agent-stuck's.
	flannel := createPod(t, cs, testPod(DefaultNamespace, "kube-flannel-ds-7xk2p", "", "agent-stuck", FlannelImage))
	setWaiting(t, cs, flannel, "ImagePullBackOff", `Back-off pulling image "`+FlannelImage+`": ErrImagePull: `+noSuchHost)
	createEvent(t, cs, "Pod", DefaultNamespace, flannel.Name, "Failed", "sriov-lane-test: Failed to pull image "+FlannelImage)
	createPod(t, cs, testPod(DefaultNamespace, "kube-flannel-ds-elsewhere", "", "agent-0", FlannelImage))
	err := failsInTime(t, func(ctx context.Context) error {
		return WaitNodesReady(ctx, cs, []string{"agent-0", "agent-stuck", "agent-missing"})
	}, "node agent-stuck", "Ready=False KubeletNotReady", "cni plugin not initialized",
		"sriov-lane-test: node agent-stuck stopped posting status", "node agent-missing: not registered", "deadline exceeded",
		"  pod kube-system/kube-flannel-ds-7xk2p on agent-stuck: phase Pending",
		"container main waiting: ImagePullBackOff: Back-off pulling image \""+FlannelImage+"\"", "no such host",
		"sriov-lane-test: Failed to pull image "+FlannelImage)
	if err != nil && strings.Contains(err.Error(), "kube-flannel-ds-elsewhere") {
		t.Errorf("a pod of another node is blamed:\n%v", err)
	}
}

func markRolledOut(t *testing.T, cs kubernetes.Interface, ns, name string, desired, available int32) {
	t.Helper()
	ds, err := cs.AppsV1().DaemonSets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	ds.Status = appsv1.DaemonSetStatus{
		ObservedGeneration:     ds.Generation,
		DesiredNumberScheduled: desired,
		CurrentNumberScheduled: desired,
		UpdatedNumberScheduled: desired,
		NumberReady:            available,
		NumberAvailable:        available,
	}
	if _, err := cs.AppsV1().DaemonSets(ns).UpdateStatus(t.Context(), ds, metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating DaemonSet %s/%s status: %v", ns, name, err)
	}
}

func TestWaitDaemonSets(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, cs := startAPI(t)
	objs, err := Objects(t.Context(), defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	var dss []nsName
	for _, u := range objs {
		if u.GetKind() == "DaemonSet" {
			dss = append(dss, nsName{u.GetNamespace(), u.GetName()})
		}
	}
	if len(dss) != 4 {
		t.Fatalf("plan has %d DaemonSets, want 4 (flannel, multus, sriov-cni, device plugin)", len(dss))
	}
	done := runWait(t, func(ctx context.Context) error { return WaitDaemonSets(ctx, cs, objs) })
	for _, d := range dss[:3] {
		markRolledOut(t, cs, d.ns, d.name, 2, 2)
	}
	expectPending(t, done)
	markRolledOut(t, cs, dss[3].ns, dss[3].name, 2, 2)
	expectDone(t, done)

	// The device plugin loses a pod: one of two available, the other crash-looping.
	markRolledOut(t, cs, DefaultNamespace, devicePluginDaemonSet, 2, 1)
	pod, err := cs.CoreV1().Pods(DefaultNamespace).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-sriov-device-plugin-x7k2p", Namespace: DefaultNamespace, Labels: map[string]string{"name": "sriov-device-plugin"}},
		Spec: corev1.PodSpec{
			NodeName:           "agent-1",
			ServiceAccountName: devicePluginSA,
			Containers:         []corev1.Container{{Name: "kube-sriovdp", Image: DevicePluginImage}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [kube-sriovdp]"}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "kube-sriovdp", Image: DevicePluginImage, RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		}},
	}
	if _, err := cs.CoreV1().Pods(DefaultNamespace).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createEvent(t, cs, "Pod", DefaultNamespace, pod.Name, "BackOff", "sriov-lane-test: Back-off restarting failed container kube-sriovdp")
	assertFailsInTime(t, func(ctx context.Context) error { return WaitDaemonSets(ctx, cs, objs) },
		"daemonset kube-system/kube-sriov-device-plugin: desired 2, updated 2, ready 1, available 1",
		"pod kube-system/kube-sriov-device-plugin-x7k2p on agent-1", "Ready=False ContainersNotReady",
		"CrashLoopBackOff", "sriov-lane-test: Back-off restarting failed container kube-sriovdp")
}

func TestWaitAllocatable(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	const res = "kubevirt.io/sriov_net"
	vfs := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), res: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	createNode(t, cs, "agent-0")
	createNode(t, cs, "agent-1")
	want := map[string]int64{"agent-0": 6, "agent-1": 6}
	done := runWait(t, func(ctx context.Context) error { return WaitAllocatable(ctx, cs, want, res) })
	setNodeStatus(t, cs, "agent-0", corev1.ConditionTrue, "KubeletReady", "ok", vfs(6))
	setNodeStatus(t, cs, "agent-1", corev1.ConditionTrue, "KubeletReady", "ok", vfs(4))
	expectPending(t, done) // 4 of 6 is not enough
	setNodeStatus(t, cs, "agent-1", corev1.ConditionTrue, "KubeletReady", "ok", vfs(6))
	expectDone(t, done)

	// agent-1's plugin now reports too few VFs and too many is wrong as well.
	setNodeStatus(t, cs, "agent-1", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", vfs(4))
	createEvent(t, cs, "Node", "", "agent-1", "DevicePluginFailure", "sriov-lane-test: 2 VFs of ens1f0 not bound to vfio-pci")
	assertFailsInTime(t, func(ctx context.Context) error { return WaitAllocatable(ctx, cs, want, res) },
		"node agent-1 (allocatable kubevirt.io/sriov_net: want 6, have 4)", "Ready=True KubeletReady",
		"sriov-lane-test: 2 VFs of ens1f0 not bound to vfio-pci")
	// More VFs than expected must not pass either. (A 500 ms deadline here
	// ended before the first list of nodes beside make test's lanes.)
	assertFailsInTime(t, func(ctx context.Context) error {
		return WaitAllocatable(ctx, cs, map[string]int64{"agent-0": 5}, res)
	}, "want 5, have 6")
	if err := WaitAllocatable(t.Context(), cs, map[string]int64{"agent-0": 6}, res); err != nil {
		t.Errorf("already satisfied: %v", err)
	}
}
