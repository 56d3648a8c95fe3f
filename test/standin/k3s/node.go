package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// resyncEvery is how often labels are checked.
const resyncEvery = 5 * time.Second

// nodeKeeper does what k3s's agent does to its Node beside kubelet: apply
// the --node-label labels kubelet may not set itself (k3s sets them through
// the API). Node status is kubelet's alone.
type nodeKeeper struct {
	client kubernetes.Interface
	name   string
	labels map[string]string

	lastErr string
}

// waitRegistered waits for kubelet to create the Node, then labels it.
func (n *nodeKeeper) waitRegistered(ctx context.Context) error {
	for {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err == nil {
			return n.label(ctx, node)
		}
		if !apierrors.IsNotFound(err) {
			logOnce(&n.lastErr, fmt.Sprintf("waiting for node %s: %v", n.name, err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (n *nodeKeeper) label(ctx context.Context, node *corev1.Node) error {
	missing := false
	for k, v := range n.labels {
		if have, ok := node.Labels[k]; !ok || have != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": n.labels}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", n.name, err)
	}
	logf("Labelled node %s: %s", n.name, describeLabels(n.labels))
	return nil
}

// keepAlive re-applies labels (a re-registered Node loses them).
func (n *nodeKeeper) keepAlive(ctx context.Context) {
	t := time.NewTicker(resyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.sync(ctx); err != nil && ctx.Err() == nil {
			logOnce(&n.lastErr, fmt.Sprintf("node %s: %v", n.name, err))
			continue
		}
		n.lastErr = ""
	}
}

func (n *nodeKeeper) sync(ctx context.Context) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node: %w", err)
	}
	if err := n.label(ctx, node); err != nil {
		return err
	}
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
	return strings.Join(parts, ",")
}
