package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// resyncEvery is how often the interim SR-IOV capacity is recomputed.
const resyncEvery = time.Second

// resourceFunc reports the extended resources ("prefix/name" -> count) the
// node should advertise now.
type resourceFunc func(ctx context.Context) (map[string]int64, error)

// nodeKeeper does what k3s's agent does to its Node beside kubelet: apply
// the --node-label labels kubelet may not set itself (k3s sets them through
// the API). Until the device plugin stand-in runs as a DaemonSet (issue #10
// item 3) it also advertises the SR-IOV VFs it finds as Node capacity, the
// documented way to advertise node-level extended resources; kubelet,
// which owns the Node status, derives allocatable from that capacity.
type nodeKeeper struct {
	client    kubernetes.Interface
	name      string
	labels    map[string]string
	resources resourceFunc

	current map[string]int64
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

// keepAlive re-applies labels (a re-registered Node loses them) and the
// interim SR-IOV capacity every second.
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
	if n.resources == nil {
		return nil
	}
	res, err := n.resources(ctx)
	if err != nil {
		return fmt.Errorf("computing SR-IOV resources: %w", err)
	}
	// Capacity as the API holds it now: kubelet drops unknown extended
	// resources when it re-registers, so compare with the object.
	have := map[string]int64{}
	for k, q := range node.Status.Capacity {
		if _, tracked := n.current[string(k)]; tracked || res[string(k)] != 0 {
			have[string(k)] = q.Value()
		}
	}
	if maps.Equal(have, res) {
		n.current = res
		return nil
	}
	capacity := map[string]any{}
	for k := range n.current {
		capacity[k] = nil // merge patch: delete what is gone
	}
	for k, v := range res {
		capacity[k] = fmt.Sprint(v)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": capacity}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().PatchStatus(ctx, n.name, patch); err != nil {
		return fmt.Errorf("patching node capacity: %w", err)
	}
	logf("node %s advertises %s", n.name, describe(res))
	n.current = res
	return nil
}

func logOnce(last *string, msg string) {
	if *last != msg {
		logf("%s", msg)
		*last = msg
	}
}

func describe(res map[string]int64) string {
	if len(res) == 0 {
		return "no extended resources"
	}
	var parts []string
	for k, v := range res {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, ", ")
}

func describeLabels(l map[string]string) string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}
