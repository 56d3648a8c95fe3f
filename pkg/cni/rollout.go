package cni

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// workload says how to watch one kind of workload and when it has rolled
// out; WaitDaemonSets and WaitDeployments are waitRollout over one each.
type workload[T runtime.Object] struct {
	kind    string
	example T
	list    func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch   func(context.Context, metav1.ListOptions) (watch.Interface, error)
	get     func(ctx context.Context, namespace, name string) (T, error)
	// key and selector read an object; pending says why it has not rolled
	// out ("" when it has; it is given nil for an object not found).
	key      func(T) nsName
	selector func(T) *metav1.LabelSelector
	pending  func(T) string
}

// waitRollout waits until every object of w's kind among objs has rolled
// out (kubectl rollout status semantics). On failure the error describes
// each one still pending: why, its last events and its pods not ready.
func waitRollout[T runtime.Object](ctx context.Context, cs kubernetes.Interface, w workload[T], objs []*unstructured.Unstructured) error {
	var want []nsName
	for _, u := range objs {
		if u.GetKind() == w.kind && u.GroupVersionKind().Group == "apps" {
			want = append(want, nsName{u.GetNamespace(), u.GetName()})
		}
	}
	if len(want) == 0 {
		return nil
	}
	pending := map[nsName]string{}
	err := watchUntil(ctx, listWatch(cs, w.list, w.watch), w.example, func(items []any) (bool, error) {
		have := map[nsName]T{}
		for _, o := range items {
			t := o.(T)
			have[w.key(t)] = t
		}
		clear(pending)
		for _, k := range want {
			if why := w.pending(have[k]); why != "" {
				pending[k] = why
			}
		}
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	keys := make([]nsName, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nsName) int { return strings.Compare(a.String(), b.String()) })
	lower := strings.ToLower(w.kind)
	return diagnosed(ctx, fmt.Sprintf("waiting for %d %ss to roll out: %v", len(want), w.kind, err), func(ctx context.Context, b *strings.Builder) {
		for _, k := range keys {
			fmt.Fprintf(b, "%s %s: %s\n", lower, k, pending[k])
			WriteEvents(ctx, b, cs, w.kind, k.ns, k.name, "  ")
			t, gerr := w.get(ctx, k.ns, k.name)
			if gerr != nil || w.selector(t) == nil {
				continue
			}
			sel, serr := metav1.LabelSelectorAsSelector(w.selector(t))
			if serr != nil {
				continue
			}
			writeUnreadyPods(ctx, b, cs, k.ns, metav1.ListOptions{LabelSelector: sel.String()})
		}
	})
}
