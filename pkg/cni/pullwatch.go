package cni

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// pullReasons are the waiting reasons kubelet gives a container whose image
// it cannot get: the errors of k8s.io/kubernetes
// pkg/kubelet/images/types.go@v1.36.3 (ErrImagePull, ImagePullBackOff,
// ImageInspectError, ErrImageNeverPull, InvalidImageName) and the two CRI
// ones evalCRIPullErr passes through (k8s.io/cri-api
// pkg/errors/errors.go@v0.36.3: RegistryUnavailable,
// SignatureValidationFailed). kubelet puts the error's text in
// state.waiting.reason and the runtime's message in state.waiting.message
// (pkg/kubelet/kubelet_pods.go@v1.36.3, convertToAPIContainerStatuses, from
// the reason cache startContainer's result fills).
var pullReasons = map[string]bool{
	"ErrImagePull":              true,
	"ImagePullBackOff":          true,
	"ImageInspectError":         true,
	"ErrImageNeverPull":         true,
	"InvalidImageName":          true,
	"RegistryUnavailable":       true,
	"SignatureValidationFailed": true,
}

// sandboxEventReason is the event kubelet records when the runtime cannot
// make a pod's sandbox ("Failed to create pod sandbox: %v";
// k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_manager.go@v1.36.3,
// SyncPod). The pod's containers then only wait in ContainerCreating, so
// a sandbox (pause) image that cannot be pulled shows in this event alone.
const sandboxEventReason = "FailedCreatePodSandBox"

// sandboxPullRE finds the sandbox image containerd could not pull:
// ensurePauseImageExists returns `failed to pull image %q: %w`
// (containerd/containerd internal/cri/server/sandbox_run.go@v2.3.4, the same
// at v2.4.0-beta.0).
var sandboxPullRE = regexp.MustCompile(`failed to pull image "([^"]+)"`)

// PullFailure is a container, or a pod's sandbox, whose image kubelet
// cannot get.
type PullFailure struct {
	Namespace, Pod, Node string
	// Container is "" for the pod's sandbox.
	Container, Image string
	// Reason is kubelet's (ErrImagePull, ...), Message the runtime's words.
	Reason, Message string
}

func (f PullFailure) String() string {
	what := "container " + f.Container
	if f.Container == "" {
		what = "pod sandbox"
	}
	return fmt.Sprintf("pod %s/%s on %s cannot pull %s (%s): %s: %s", f.Namespace, f.Pod, nodeOrUnscheduled(f.Node), f.Image, what, f.Reason, oneLine(f.Message))
}

func nodeOrUnscheduled(node string) string {
	if node == "" {
		return "(unscheduled)"
	}
	return node
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// podPullFailures are the containers of p waiting for an image kubelet
// cannot get.
func podPullFailures(p *corev1.Pod) []PullFailure {
	var out []PullFailure
	for _, s := range podContainerStatuses(p) {
		w := s.State.Waiting
		if w == nil || !pullReasons[w.Reason] {
			continue
		}
		img := s.Image
		if img == "" {
			img = specImage(p, s.Name)
		}
		out = append(out, PullFailure{Namespace: p.Namespace, Pod: p.Name, Node: p.Spec.NodeName,
			Container: s.Name, Image: img, Reason: w.Reason, Message: w.Message})
	}
	return out
}

func podContainerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses)
}

func specImage(p *corev1.Pod, container string) string {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name == container {
			return c.Image
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// sandboxPullFailure reads a FailedCreatePodSandBox event of p. It counts
// only while p has not started: events outlive what they report (an hour
// by default), and a sandbox that came up later is no failure.
func sandboxPullFailure(e *corev1.Event, p *corev1.Pod) (PullFailure, bool) {
	if e.Reason != sandboxEventReason || e.InvolvedObject.Kind != "Pod" || p == nil || e.InvolvedObject.UID != p.UID || podStarted(p) {
		return PullFailure{}, false
	}
	m := sandboxPullRE.FindStringSubmatch(e.Message)
	if m == nil {
		return PullFailure{}, false
	}
	return PullFailure{Namespace: p.Namespace, Pod: p.Name, Node: p.Spec.NodeName,
		Image: m[1], Reason: sandboxEventReason, Message: e.Message}, true
}

// podStarted says whether any container of p has run: its sandbox exists.
func podStarted(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
		return true
	}
	for _, s := range podContainerStatuses(p) {
		if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// pullFailures are every current pull failure among pods, given the
// FailedCreatePodSandBox events, in pod order.
func pullFailures(pods []*corev1.Pod, sandboxEvents []*corev1.Event) []PullFailure {
	byUID := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		byUID[p.UID] = p
	}
	// The newest event of a pod says what its last try met.
	sandbox := map[types.UID]PullFailure{}
	newest := map[types.UID]time.Time{}
	for _, e := range sandboxEvents {
		p := byUID[e.InvolvedObject.UID]
		f, ok := sandboxPullFailure(e, p)
		if !ok {
			continue
		}
		if at, seen := newest[p.UID]; !seen || eventTime(*e).After(at) {
			sandbox[p.UID], newest[p.UID] = f, eventTime(*e)
		}
	}
	var out []PullFailure
	for _, p := range pods {
		if f, ok := sandbox[p.UID]; ok {
			out = append(out, f)
		}
		out = append(out, podPullFailures(p)...)
	}
	return out
}

func sortPods(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// ReportPullFailures watches every pod of the cluster until ctx ends or
// stop is called, and warns of each container (or pod sandbox) kubelet fails
// to get an image for as soon as kubelet reports it: pod, node, image and
// the runtime's reason; hint (what to do about it) follows the first one.
// It only reports: kubelet retries a failed pull with back-off, from 10 s
// doubling to 5 min (k8s.io/kubernetes pkg/kubelet/kubelet.go@v1.36.3,
// imageBackOffPeriod, MaxImageBackOff), so a registry that hiccuped, or an
// image loaded into the nodes meanwhile, still makes the wait succeed. All
// namespaces: k3s's own pods (CoreDNS, ...) pull as the lane's do.
func ReportPullFailures(ctx context.Context, cs kubernetes.Interface, lg log.Logger, hint string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	r := &pullReporter{log: lg, hint: hint, seen: map[string]bool{}}
	if d, ok := ctx.Deadline(); ok {
		r.deadline = d
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = watchUntil(ctx, podsLW(cs, metav1.NamespaceAll, metav1.ListOptions{}), &corev1.Pod{}, func(objs []any) (bool, error) {
			r.setPods(objs)
			return false, nil
		})
	}()
	go func() {
		defer wg.Done()
		_ = watchUntil(ctx, sandboxEventsLW(cs), &corev1.Event{}, func(objs []any) (bool, error) {
			r.setEvents(objs)
			return false, nil
		})
	}()
	return func() { cancel(); wg.Wait() }
}

// sandboxEventsSelector keeps the event watch to the one reason it needs.
var sandboxEventsSelector = fields.OneTermEqualSelector("reason", sandboxEventReason).String()

func sandboxEventsLW(cs kubernetes.Interface) cache.ListerWatcher {
	return listWatch(cs, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = sandboxEventsSelector
		return cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sandboxEventsSelector
		return cs.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, o)
	})
}

// pullReporter holds the latest pods and sandbox events of both watches
// and logs each pull failure once per pod and container.
type pullReporter struct {
	log      log.Logger
	hint     string
	deadline time.Time

	mu     sync.Mutex
	pods   []*corev1.Pod
	events []*corev1.Event
	seen   map[string]bool
	hinted bool
}

func (r *pullReporter) setPods(objs []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = r.pods[:0]
	for _, o := range objs {
		r.pods = append(r.pods, o.(*corev1.Pod))
	}
	sortPods(r.pods)
	r.report()
}

func (r *pullReporter) setEvents(objs []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = r.events[:0]
	for _, o := range objs {
		r.events = append(r.events, o.(*corev1.Event))
	}
	r.report()
}

// report logs the failures not logged yet. Call with r.mu held. Once per
// pod and container: a pod whose pull keeps failing would otherwise log
// every retry; the wait's error shows where each pod stands at its end.
func (r *pullReporter) report() {
	for _, f := range pullFailures(r.pods, r.events) {
		key := f.Namespace + "/" + f.Pod + "/" + f.Container
		if r.seen[key] {
			continue
		}
		r.seen[key] = true
		r.log.Warn(f.String())
		if !r.hinted && r.hint != "" {
			r.hinted = true
			r.log.Warnf("%s; %s", r.hint, r.waitingOn())
		}
	}
}

func (r *pullReporter) waitingOn() string {
	s := "waiting on (kubelet retries the pull with back-off up to 5 min)"
	if !r.deadline.IsZero() {
		s += fmt.Sprintf(" until the wait's timeout in %s", time.Until(r.deadline).Round(time.Second))
	}
	return s
}

// maxUnreadyLines bounds the pods WithUnreadyPods lists.
const maxUnreadyLines = 30

// WithUnreadyPods adds to a failed wait's err every pod of the cluster
// that is not Ready, one line each with why, pull failures first, and
// hint when any pod cannot pull its image: which pods hold the lane back
// is the first thing a timeout must say.
func WithUnreadyPods(ctx context.Context, cs kubernetes.Interface, err error, hint string) error {
	dctx, cancel := DiagnoseContext(ctx)
	defer cancel()
	list, lerr := cs.CoreV1().Pods(metav1.NamespaceAll).List(dctx, metav1.ListOptions{})
	if lerr != nil {
		return fmt.Errorf("%w\npods: cannot list: %v", err, lerr)
	}
	var events []*corev1.Event
	if evs, eerr := cs.CoreV1().Events(metav1.NamespaceAll).List(dctx, metav1.ListOptions{FieldSelector: sandboxEventsSelector}); eerr == nil {
		for i := range evs.Items {
			events = append(events, &evs.Items[i])
		}
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		// A finished Job's pod is never Ready and holds nothing back.
		if p.Status.Phase != corev1.PodSucceeded && !PodReady(p) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return fmt.Errorf("%w\npods not Ready: none", err)
	}
	sortPods(pods)
	failures := pullFailures(pods, events)
	pulling := map[types.UID]bool{}
	for _, p := range pods {
		for _, f := range failures {
			if f.Namespace == p.Namespace && f.Pod == p.Name {
				pulling[p.UID] = true
			}
		}
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return cmpBool(pulling[b.UID], pulling[a.UID]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%v\npods not Ready (%d), those that cannot pull an image first:\n", err, len(pods))
	shown := 0
	for _, p := range pods {
		if shown == maxUnreadyLines {
			fmt.Fprintf(&b, "  ... %d more\n", len(pods)-shown)
			break
		}
		shown++
		var mine []PullFailure
		for _, f := range failures {
			if f.Namespace == p.Namespace && f.Pod == p.Name {
				mine = append(mine, f)
			}
		}
		if len(mine) == 0 {
			fmt.Fprintf(&b, "  pod %s/%s on %s: %s\n", p.Namespace, p.Name, nodeOrUnscheduled(p.Spec.NodeName), podNotReadyReason(p))
			continue
		}
		for _, f := range mine {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	if len(failures) > 0 && hint != "" {
		var images []string
		for _, f := range failures {
			if !slices.Contains(images, f.Image) {
				images = append(images, f.Image)
			}
		}
		fmt.Fprintf(&b, "images the nodes cannot pull: %s; %s\n", strings.Join(images, ", "), hint)
	}
	return fmt.Errorf("%s", strings.TrimRight(b.String(), "\n"))
}

// podNotReadyReason says in one line why p is not Ready: the first
// container that is not, else the first condition that is false, else
// its phase.
func podNotReadyReason(p *corev1.Pod) string {
	for _, s := range podContainerStatuses(p) {
		switch {
		case s.State.Waiting != nil:
			return fmt.Sprintf("container %s waiting: %s: %s", s.Name, s.State.Waiting.Reason, oneLine(s.State.Waiting.Message))
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			return fmt.Sprintf("container %s terminated: %s (exit %d): %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, oneLine(s.State.Terminated.Message))
		case s.State.Running != nil && !s.Ready:
			return fmt.Sprintf("container %s running, not ready (restarts %d)", s.Name, s.RestartCount)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, oneLine(c.Message))
		}
	}
	return "phase " + string(p.Status.Phase)
}
