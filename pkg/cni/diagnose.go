package cni

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Diagnostics are gathered after a wait's context has ended, so they get
// their own short deadline: a CI log must still say why.
const diagnoseTimeout = 15 * time.Second

// maxEvents is how many of the newest events are shown per object.
const maxEvents = 5

func DiagnoseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
}

// WriteEvents appends the newest events whose involvedObject is kind/name
// (namespace "" searches all namespaces: node events land in "default").
func WriteEvents(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, kind, namespace, name, indent string) {
	sel := fields.Set{"involvedObject.name": name, "involvedObject.kind": kind}.AsSelector().String()
	list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		fmt.Fprintf(b, "%sevents: cannot list: %v\n", indent, err)
		return
	}
	evs := list.Items
	if len(evs) == 0 {
		fmt.Fprintf(b, "%sevents: none\n", indent)
		return
	}
	slices.SortStableFunc(evs, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
	if len(evs) > maxEvents {
		evs = evs[len(evs)-maxEvents:]
	}
	fmt.Fprintf(b, "%slast events:\n", indent)
	for _, e := range evs {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" x%d", e.Count)
		}
		fmt.Fprintf(b, "%s  %s %s %s%s: %s\n", indent, eventTime(e).UTC().Format(time.RFC3339), e.Type, e.Reason, count, strings.TrimSpace(e.Message))
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func writeNodeConditions(b *strings.Builder, n *corev1.Node, indent string) {
	if len(n.Status.Conditions) == 0 {
		fmt.Fprintf(b, "%sconditions: none reported\n", indent)
		return
	}
	fmt.Fprintf(b, "%sconditions:\n", indent)
	for _, c := range n.Status.Conditions {
		fmt.Fprintf(b, "%s  %s=%s %s: %s\n", indent, c.Type, c.Status, c.Reason, c.Message)
	}
}

// WritePod describes a pod that is not Ready: phase, conditions, container
// states and its events.
func WritePod(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, p *corev1.Pod, indent string) {
	node := p.Spec.NodeName
	if node == "" {
		node = "(unscheduled)"
	}
	fmt.Fprintf(b, "%spod %s/%s on %s: phase %s\n", indent, p.Namespace, p.Name, node, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(b, "%s  %s=%s %s: %s\n", indent, c.Type, c.Status, c.Reason, c.Message)
	}
	for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(b, "%s  container %s waiting: %s: %s\n", indent, s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			if s.RestartCount > 0 {
				// Crash-looping: what the last run printed before it died.
				writeLogTail(ctx, b, cs, p, s.Name, true, indent+"    ")
			}
		case s.State.Terminated != nil:
			fmt.Fprintf(b, "%s  container %s terminated: %s (exit %d): %s\n", indent, s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
			if s.State.Terminated.ExitCode != 0 {
				writeLogTail(ctx, b, cs, p, s.Name, false, indent+"    ")
			}
		case !s.Ready:
			fmt.Fprintf(b, "%s  container %s running, not ready (restarts %d)\n", indent, s.Name, s.RestartCount)
		}
	}
	WriteEvents(ctx, b, cs, "Pod", p.Namespace, p.Name, indent+"  ")
}

// maxLogLines is how many of a failed container's last log lines are
// shown: a component that exits on a bad flag or config says why in its
// last few lines, which its status and events never carry.
const maxLogLines int64 = 10

// logReadTimeout bounds one log read inside the diagnosis's own deadline:
// the API server fetches logs from the node's kubelet, and a node that is
// gone (when up fails, often the case) would otherwise spend the whole
// diagnosis on one dial, leaving the events after it unread.
const logReadTimeout = 3 * time.Second

// writeLogTail appends the last lines container logged (previous: of the
// run before this one, the one that crashed; PodLogOptions Previous and
// TailLines, kubernetes/api core/v1/types.go@v0.37.2). The kubelet serves
// them; where it cannot, that is said and nothing fails.
func writeLogTail(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, p *corev1.Pod, container string, previous bool, indent string) {
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	raw, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: previous, TailLines: ptr.To(maxLogLines),
	}).DoRaw(ctx)
	if err != nil {
		fmt.Fprintf(b, "%slog: cannot read: %v\n", indent, err)
		return
	}
	out := strings.TrimRight(string(raw), "\n")
	if out == "" {
		fmt.Fprintf(b, "%slog: empty\n", indent)
		return
	}
	fmt.Fprintf(b, "%slast log lines:\n", indent)
	for line := range strings.SplitSeq(out, "\n") {
		fmt.Fprintf(b, "%s  %s\n", indent, line)
	}
}

func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeUnreadyPods describes the pods matched by opts that are not Ready,
// one level in: every caller writes them under a line of its own (a node,
// a workload, a namespace).
func writeUnreadyPods(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, namespace string, opts metav1.ListOptions) {
	const indent = "  "
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil {
		fmt.Fprintf(b, "%spods: cannot list: %v\n", indent, err)
		return
	}
	var unready []*corev1.Pod
	for i := range pods.Items {
		if !PodReady(&pods.Items[i]) {
			unready = append(unready, &pods.Items[i])
		}
	}
	// Pods that cannot pull an image first: they are the likeliest cause,
	// and the list is cut short.
	slices.SortStableFunc(unready, func(x, y *corev1.Pod) int {
		return cmpBool(len(podPullFailures(y)) > 0, len(podPullFailures(x)) > 0)
	})
	for i, p := range unready {
		if i == 5 {
			fmt.Fprintf(b, "%s... %d more pods not ready\n", indent, len(unready)-i)
			return
		}
		WritePod(ctx, b, cs, p, indent)
	}
	if len(pods.Items) == 0 {
		fmt.Fprintf(b, "%spods: none\n", indent)
	}
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}
