package cni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// All waits end when ctx does; set its deadline. On failure the error
// describes every object still pending (conditions, pods, last events).

func nodesLW(cs kubernetes.Interface) cache.ListerWatcher {
	return listWatch(cs, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Nodes().List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Nodes().Watch(ctx, o)
	})
}

// podsLW lists and watches the pods in namespace that sel's label and
// field selectors match.
func podsLW(cs kubernetes.Interface, namespace string, sel metav1.ListOptions) cache.ListerWatcher {
	return listWatch(cs, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector, o.FieldSelector = sel.LabelSelector, sel.FieldSelector
		return cs.CoreV1().Pods(namespace).List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector, o.FieldSelector = sel.LabelSelector, sel.FieldSelector
		return cs.CoreV1().Pods(namespace).Watch(ctx, o)
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitNodesReady waits until every named node exists and is Ready.
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, names []string) error {
	pending := slices.Clone(names)
	err := watchUntil(ctx, nodesLW(cs), &corev1.Node{}, func(objs []any) (bool, error) {
		pending = notReady(objs, names, func(o any) (string, bool) { n := o.(*corev1.Node); return n.Name, nodeReady(n) })
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	header := fmt.Sprintf("waiting for nodes %s to be Ready: %v; not Ready: %s", strings.Join(names, ", "), err, strings.Join(pending, ", "))
	return diagnosed(ctx, header, func(ctx context.Context, b *strings.Builder) {
		for _, name := range pending {
			writeNodeDiagnosis(ctx, b, cs, name, "")
		}
	})
}

// WaitNodesRegistered waits until a Node object exists for each of names,
// Ready or not: what a cluster that came back empty needs before its nodes
// can be labelled (their kubelets register them again as they restart).
func WaitNodesRegistered(ctx context.Context, cs kubernetes.Interface, names []string) error {
	pending := slices.Clone(names)
	err := watchUntil(ctx, nodesLW(cs), &corev1.Node{}, func(objs []any) (bool, error) {
		pending = notReady(objs, names, func(o any) (string, bool) { return o.(*corev1.Node).Name, true })
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for nodes %s to register: %w; not registered: %s", strings.Join(names, ", "), err, strings.Join(pending, ", "))
	}
	return nil
}

// diagnosed is a failed wait's error: header, then what write adds. write
// gets a context of its own, as the wait's has usually ended by then.
func diagnosed(ctx context.Context, header string, write func(ctx context.Context, b *strings.Builder)) error {
	dctx, cancel := DiagnoseContext(ctx)
	defer cancel()
	var b strings.Builder
	b.WriteString(header + "\n")
	write(dctx, &b)
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// writeNodeDiagnosis writes node name's conditions and events, and the pods
// on it that are not Ready.
func writeNodeDiagnosis(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, name, extra string) {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(b, "node %s: not registered%s\n", name, extra)
	case err != nil:
		fmt.Fprintf(b, "node %s: cannot get: %v\n", name, err)
	default:
		fmt.Fprintf(b, "node %s%s:\n", name, extra)
		writeNodeConditions(b, n, "  ")
	}
	WriteEvents(ctx, b, cs, "Node", "", name, "  ")
	// A node waits for its CNI (no conflist until Flannel or Calico runs
	// there: "cni plugin not initialized"), so the pods on it that are not
	// Ready are what holds it back.
	writeUnreadyPods(ctx, b, cs, metav1.NamespaceAll,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
}

type nsName struct{ ns, name string }

func (n nsName) String() string { return n.ns + "/" + n.name }

// WaitDaemonSets waits until every DaemonSet among objs has rolled out: the
// controller observed its generation and every desired pod is updated and
// available (kubectl rollout status semantics).
func WaitDaemonSets(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured) error {
	return waitRollout(ctx, cs, workload[*appsv1.DaemonSet]{
		kind:    "DaemonSet",
		example: &appsv1.DaemonSet{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.AppsV1().DaemonSets(metav1.NamespaceAll).Watch(ctx, o)
		},
		get: func(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error) {
			return cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		key:      func(d *appsv1.DaemonSet) nsName { return nsName{d.Namespace, d.Name} },
		selector: func(d *appsv1.DaemonSet) *metav1.LabelSelector { return d.Spec.Selector },
		pending:  daemonSetPending,
	}, objs)
}

// daemonSetPending says why ds has not rolled out, or "" when it has.
func daemonSetPending(ds *appsv1.DaemonSet) string {
	if ds == nil {
		return "not found"
	}
	s := ds.Status
	if s.ObservedGeneration < ds.Generation {
		return fmt.Sprintf("generation %d not yet observed by the controller (observed %d)", ds.Generation, s.ObservedGeneration)
	}
	if s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		return fmt.Sprintf("desired %d, updated %d, ready %d, available %d", s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
	}
	return ""
}

// WaitAllocatable waits until each node in want reports exactly want[node]
// of resource (e.g. "kubevirt.io/sriov_net") as allocatable: the device
// plugin found every VF the lane created, no more, no fewer.
func WaitAllocatable(ctx context.Context, cs kubernetes.Interface, want map[string]int64, resource string) error {
	if len(want) == 0 {
		return nil
	}
	rn := corev1.ResourceName(resource)
	got := map[string]string{}
	err := watchUntil(ctx, nodesLW(cs), &corev1.Node{}, func(objs []any) (bool, error) {
		clear(got)
		for _, o := range objs {
			n := o.(*corev1.Node)
			if _, ok := want[n.Name]; !ok {
				continue
			}
			if q, ok := n.Status.Allocatable[rn]; ok {
				got[n.Name] = q.String()
			}
		}
		for node, w := range want {
			if got[node] != fmt.Sprint(w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err == nil {
		return nil
	}
	return nodesPending(ctx, cs, fmt.Sprintf("waiting for allocatable %s: %v", resource, err), slices.Collect(maps.Keys(want)), func(node string) string {
		have, ok := got[node]
		if !ok {
			have = "none"
		}
		if have == fmt.Sprint(want[node]) {
			return ""
		}
		return fmt.Sprintf("allocatable %s: want %d, have %s", resource, want[node], have)
	})
}

// nodesPending is a node wait's error: header, then for each of nodes
// (sorted) for which pending says what it lacks, the node's conditions
// and events and the pods on it that are not ready.
func nodesPending(ctx context.Context, cs kubernetes.Interface, header string, nodes []string, pending func(node string) string) error {
	return diagnosed(ctx, header, func(ctx context.Context, b *strings.Builder) {
		for _, node := range slices.Sorted(slices.Values(nodes)) {
			if why := pending(node); why != "" {
				writeNodeDiagnosis(ctx, b, cs, node, " ("+why+")")
			}
		}
	})
}

// WaitPodsReady waits until the named pods in namespace are Ready (the
// smoke pod of `verify`).
func WaitPodsReady(ctx context.Context, cs kubernetes.Interface, namespace string, names []string) error {
	var pending []string
	err := watchUntil(ctx, podsLW(cs, namespace, metav1.ListOptions{}), &corev1.Pod{}, func(objs []any) (bool, error) {
		pending = notReady(objs, names, func(o any) (string, bool) { p := o.(*corev1.Pod); return p.Name, PodReady(p) })
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	header := fmt.Sprintf("waiting for pods %s in %s to be Ready: %v", strings.Join(pending, ", "), namespace, err)
	return diagnosed(ctx, header, func(ctx context.Context, b *strings.Builder) {
		for _, n := range pending {
			p, gerr := cs.CoreV1().Pods(namespace).Get(ctx, n, metav1.GetOptions{})
			if gerr != nil {
				fmt.Fprintf(b, "pod %s/%s: %v\n", namespace, n, gerr)
				WriteEvents(ctx, b, cs, "Pod", namespace, n, "  ")
				continue
			}
			WritePod(ctx, b, cs, p, "")
		}
	})
}

// notReady returns the names, in order, whose object in objs is missing or
// not ready by readiness.
func notReady(objs []any, names []string, readiness func(any) (name string, ready bool)) []string {
	ready := map[string]bool{}
	for _, o := range objs {
		n, ok := readiness(o)
		ready[n] = ok
	}
	var pending []string
	for _, n := range names {
		if !ready[n] {
			pending = append(pending, n)
		}
	}
	return pending
}

// WaitPodGone waits until no pod namespace/name with uid exists (the
// smoke pod, whose VF is free only then).
func WaitPodGone(ctx context.Context, cs kubernetes.Interface, namespace, name string, uid types.UID) error {
	lw := podsLW(cs, namespace, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	return watchUntil(ctx, lw, &corev1.Pod{}, func(objs []any) (bool, error) {
		for _, o := range objs {
			if o.(*corev1.Pod).UID == uid {
				return false, nil
			}
		}
		return true, nil
	})
}
