package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// nodeKeeper does what k3s does to its Node beside kubelet, once kubelet
// registered it: it patches the --node-label labels onto it (the agent's
// configureNode, k3s-io/k3s pkg/agent/run.go@v1.35.5+k3s1)
// and, on a server, the control-plane role (k3s-io/k3s
// pkg/server/server.go@v1.35.5+k3s1 setNodeLabelsAndAnnotations). It does so once per start, retrying until it succeeds, as
// k3s does. Node status is kubelet's alone. Labels kubelet may not set
// never get here: kubelet refused to start with them in --node-labels.
type nodeKeeper struct {
	client kubernetes.Interface
	name   string
	labels map[string]string

	lastErr string
}

const nodeRetry = 300 * time.Millisecond

// configure waits for the Node and patches its labels, until it succeeds or
// ctx ends.
func (n *nodeKeeper) configure(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, nodeRetry, true, func(ctx context.Context) (bool, error) {
		err := n.label(ctx)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			logOnce(&n.lastErr, fmt.Sprintf("Failed to set labels on node %s: %v", n.name, err))
		}
		return false, nil
	})
}

func (n *nodeKeeper) label(ctx context.Context) error {
	if _, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err != nil {
		return err
	}
	if len(n.labels) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": n.labels}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", n.name, err)
	}
	logf("Labels have been set successfully on node: %s (%s)", n.name, describeLabels(n.labels))
	return nil
}

func logOnce(last *string, msg string) {
	if *last != msg {
		logf("%s", msg)
		*last = msg
	}
}

func describeLabels(l map[string]string) string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
