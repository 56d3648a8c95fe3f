package cni

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Where the Tigera operator reports Calico's health. The installation
// controller's TigeraStatus is named "calico" and carries the condition
// types Available, Progressing and Degraded (tigera/operator
// api/v1/tigerastatus_types.go and
// pkg/controller/installation/core_controller.go@v1.42.3, the operator
// CalicoVersion pins); calico-node runs as calico-system/calico-node
// (pkg/common/common.go@v1.42.3).
var tigeraStatusGVR = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "tigerastatuses"}

const (
	calicoTigeraStatus  = "calico"
	calicoNodeNamespace = "calico-system"
	calicoNodeDaemonSet = "calico-node"
	tigeraOperatorNS    = "tigera-operator"
)

// WaitCalico waits until the operator reports Calico Available, or
// calico-node has rolled out on every node, whichever comes first: the
// operator can lag behind a working data plane, and either proves pods get
// addresses. On failure the error shows the TigeraStatus conditions, the
// DaemonSet's state and the pods that are not ready.
func WaitCalico(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	status := make(chan error, 1)
	rollout := make(chan error, 1)
	go func() { status <- waitTigeraAvailable(wctx, dyn) }()
	go func() {
		rollout <- WaitDaemonSets(wctx, cs, []*unstructured.Unstructured{daemonSetRef(calicoNodeNamespace, calicoNodeDaemonSet)})
	}()
	var statusErr, rolloutErr error
	for range 2 {
		select {
		case statusErr = <-status:
			if statusErr == nil {
				return nil
			}
			status = nil
		case rolloutErr = <-rollout:
			if rolloutErr == nil {
				return nil
			}
			rollout = nil
		}
	}
	header := fmt.Sprintf("waiting for Calico (TigeraStatus %s Available or %s/%s rolled out): %v", calicoTigeraStatus, calicoNodeNamespace, calicoNodeDaemonSet, statusErr)
	return diagnosed(ctx, header, func(ctx context.Context, b *strings.Builder) {
		writeTigeraStatus(ctx, b, dyn)
		fmt.Fprintf(b, "%s\n", rolloutErr)
		fmt.Fprintf(b, "namespace %s:\n", tigeraOperatorNS)
		writeUnreadyPods(ctx, b, cs, tigeraOperatorNS, metav1.ListOptions{})
	})
}

func daemonSetRef(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("DaemonSet")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func waitTigeraAvailable(ctx context.Context, dyn dynamic.Interface) error {
	res := dyn.Resource(tigeraStatusGVR)
	sel := "metadata.name=" + calicoTigeraStatus
	lw := listWatch(dyn, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = sel
		return res.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return res.Watch(ctx, o)
	})
	return watchUntil(ctx, lw, &unstructured.Unstructured{}, func(items []any) (bool, error) {
		for _, it := range items {
			if status, _, _ := tigeraCondition(it.(*unstructured.Unstructured), "Available"); status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// tigeraCondition returns the status, reason and message of a condition.
func tigeraCondition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message
	}
	return "", "", ""
}

func writeTigeraStatus(ctx context.Context, b *strings.Builder, dyn dynamic.Interface) {
	u, err := dyn.Resource(tigeraStatusGVR).Get(ctx, calicoTigeraStatus, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(b, "tigerastatus %s: %v\n", calicoTigeraStatus, err)
		return
	}
	fmt.Fprintf(b, "tigerastatus %s:\n", calicoTigeraStatus)
	for _, typ := range []string{"Available", "Progressing", "Degraded"} {
		status, reason, msg := tigeraCondition(u, typ)
		if status == "" {
			fmt.Fprintf(b, "  %s: not reported\n", typ)
			continue
		}
		fmt.Fprintf(b, "  %s=%s %s: %s\n", typ, status, reason, msg)
	}
}
