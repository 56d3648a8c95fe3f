package cni

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/apiserver"
)

// startAPI starts a real kube-apiserver (skipped, or failed under
// SRIOV_LANE_TEST_STRICT=1, without $SRIOV_LANE_TEST_ASSETS).
func startAPI(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, cs := apiserver.ClientsForTest(t, kubernetes.NewForConfig)
	return cfg, cs
}

// ensureDefaultServiceAccount creates the SA "default", which pods in ns
// default to; there is no controller-manager to do it.
func ensureDefaultServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createEvent records a Warning event about kind ns/name, as a kubelet or
// controller would.
func createEvent(t *testing.T, cs kubernetes.Interface, kind, ns, name, reason, msg string) {
	t.Helper()
	evNS := ns
	if evNS == "" {
		evNS = metav1.NamespaceDefault
	}
	now := metav1.NewTime(time.Now())
	_, err := cs.CoreV1().Events(evNS).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + ".", Namespace: evNS},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
		Reason:         reason,
		Message:        msg,
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "sriov-lane-test"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating event: %v", err)
	}
}

func createNode(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setNodeStatus sets conditions and allocatable through the status
// subresource, the way a kubelet reports them.
func setNodeStatus(t *testing.T, cs kubernetes.Interface, name string, ready corev1.ConditionStatus, reason, msg string, alloc corev1.ResourceList) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}}
	if alloc != nil {
		n.Status.Allocatable = alloc
		n.Status.Capacity = alloc
	}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating node %s status: %v", name, err)
	}
}

// clients are the clients a command run makes for cfg.
func clients(t *testing.T, cfg *rest.Config) *kube.Clients {
	t.Helper()
	kc, err := kube.ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}
