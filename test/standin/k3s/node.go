package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// heartbeatEvery is how often Ready is refreshed when nothing changes.
	heartbeatEvery = 5 * time.Second
	// resyncEvery is how often extended resources are recomputed, the pace
	// at which the real device plugin would notice new VFs.
	resyncEvery = time.Second
)

// resourceFunc reports the extended resources ("prefix/name" -> count) the
// node should advertise now.
type resourceFunc func(ctx context.Context) (map[string]int64, error)

// nodeKeeper does the parts of a kubelet the lane observes: register the
// Node, keep it Ready, advertise device-plugin resources.
type nodeKeeper struct {
	client    kubernetes.Interface
	name      string
	ip        string
	labels    map[string]string
	resources resourceFunc

	current  map[string]int64
	lastBeat time.Time
	lastErr  string
	resErr   string
}

func (n *nodeKeeper) register(ctx context.Context) error {
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.allLabels()}}
	_, err := n.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A restarted node container keeps its name: adopt the object.
		existing, gerr := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("reading existing node: %w", gerr)
		}
		if existing.Labels == nil {
			existing.Labels = map[string]string{}
		}
		maps.Copy(existing.Labels, want.Labels)
		_, err = n.client.CoreV1().Nodes().Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating node object: %w", err)
	}
	return n.sync(ctx, true)
}

func (n *nodeKeeper) allLabels() map[string]string {
	l := map[string]string{
		"kubernetes.io/hostname":           n.name,
		"kubernetes.io/os":                 runtime.GOOS,
		"kubernetes.io/arch":               runtime.GOARCH,
		"beta.kubernetes.io/os":            runtime.GOOS,
		"beta.kubernetes.io/arch":          runtime.GOARCH,
		"node.kubernetes.io/instance-type": "k3s",
	}
	maps.Copy(l, n.labels)
	return l
}

// keepAlive recomputes resources every second and writes status when they
// change or a heartbeat is due. Errors are logged once per distinct message:
// a stand-in that dies would hide the problem behind a restart loop.
func (n *nodeKeeper) keepAlive(ctx context.Context) {
	t := time.NewTicker(resyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.sync(ctx, false); err != nil && ctx.Err() == nil {
			if msg := err.Error(); msg != n.lastErr {
				logf("node %s: %s", n.name, msg)
				n.lastErr = msg
			}
			continue
		}
		n.lastErr = ""
	}
}

func (n *nodeKeeper) sync(ctx context.Context, force bool) error {
	res := n.current
	if n.resources != nil {
		got, err := n.resources(ctx)
		if err != nil {
			// Keep advertising the last good set rather than flapping to zero.
			logOnce(&n.resErr, fmt.Sprintf("computing SR-IOV resources: %v", err))
		} else {
			res = got
			n.resErr = ""
		}
	}
	changed := !maps.Equal(res, n.current)
	if !force && !changed && time.Since(n.lastBeat) < heartbeatEvery {
		return nil
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Someone deleted the Node (as `kubectl delete node` would); a kubelet
		// re-registers, so do we.
		return n.register(ctx)
	}
	if err != nil {
		return fmt.Errorf("reading node: %w", err)
	}
	n.fillStatus(node, res)
	if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating node status: %w", err)
	}
	if changed {
		logf("node %s advertises %s", n.name, describe(res))
	}
	n.current = res
	n.lastBeat = time.Now()
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

// fillStatus sets capacity/allocatable to the node's base resources plus
// res. Every other extended resource ("domain/name") is dropped: like the
// kubelet, the stand-in owns all device-plugin resources of its node.
func (n *nodeKeeper) fillStatus(node *corev1.Node, res map[string]int64) {
	base := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for _, list := range []*corev1.ResourceList{&node.Status.Capacity, &node.Status.Allocatable} {
		out := corev1.ResourceList{}
		for k, v := range *list {
			if !strings.Contains(string(k), "/") {
				out[k] = v
			}
		}
		maps.Copy(out, base)
		for k, v := range res {
			out[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
		*list = out
	}

	now := metav1.Now()
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "stand-in"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "stand-in"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "stand-in"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "sriov-lane stand-in k3s is posting ready status"},
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = now
		conds[i].LastTransitionTime = now
		for _, old := range node.Status.Conditions {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status.Conditions = conds
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.name}}
	if n.ip != "" {
		node.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}}, node.Status.Addresses...)
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion:          "v1.35.5+k3s1",
		KubeProxyVersion:        "v1.35.5+k3s1",
		ContainerRuntimeVersion: "standin://0.0.0",
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
		OSImage:                 "sriov-lane stand-in k3s",
	}
}

// memTotal reads MemTotal from /proc/meminfo in bytes (0 if unreadable).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
