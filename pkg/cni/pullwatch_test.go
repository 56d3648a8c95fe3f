package cni

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// What containerd and kubelet write when a node cannot resolve the
// registry: containerd's pull error (internal/cri/server/images/image_pull.go
// @v2.3.4, "failed to pull and unpack image %q: %w") under kubelet's
// reasons, and the sandbox's under "Failed to create pod sandbox: %v".
const (
	noSuchHost   = `failed to pull and unpack image "ghcr.io/flannel-io/flannel:v0.28.9": failed to resolve reference "ghcr.io/flannel-io/flannel:v0.28.9": failed to do request: Head "https://ghcr.io/v2/flannel-io/flannel/manifests/v0.28.9": dial tcp: lookup ghcr.io on 127.0.0.11:53: no such host`
	pauseImage   = "docker.io/rancher/mirrored-pause:3.6"
	sandboxPull  = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to pull image "` + pauseImage + `": failed to pull and unpack image "` + pauseImage + `": dial tcp: lookup registry-1.docker.io: no such host`
	sandboxNoCNI = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "0a1b": plugin type="multus" failed (add): cni plugin not initialized`
)

func testPod(ns, name, uid, node, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: image}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// setWaiting reports p's container as waiting with reason, as kubelet does
// through the status subresource.
func setWaiting(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason, msg string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	p, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podEvent(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, reason, msg string) {
	t.Helper()
	now := metav1.Now()
	_, err := cs.CoreV1().Events(p.Namespace).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: p.Name + "." + reason, Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: p.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func collectLines() (log.Logger, <-chan string) {
	ch := make(chan string, 100)
	return log.NewPrinter(lineWriter(ch), false), ch
}

// lineWriter sends each write, one printed line, to its channel: a pull
// failure is a warning, shown without -v.
type lineWriter chan<- string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- strings.TrimSpace(strings.ReplaceAll(strings.TrimSuffix(string(p), "\n"), "\n", " "))
	return len(p), nil
}

// nextLine waits for the next logged line; a report is prompt when it
// comes well within what a watch takes to deliver a change.
func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(bound.Scaled(3 * time.Second)):
		t.Fatalf("no line reported within %s of kubelet's status", bound.Scaled(3*time.Second))
		return ""
	}
}

func noLine(t *testing.T, lines <-chan string, why string) {
	t.Helper()
	select {
	case l := <-lines:
		t.Errorf("%s, yet reported: %s", why, l)
	case <-time.After(bound.Scaled(500 * time.Millisecond)):
	}
}

func wantAll(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("lacks %q:\n%s", w, got)
		}
	}
}

// A pull failure is reported as soon as kubelet's status says so, once per
// pod and container, with pod, node, image and the runtime's message, and
// the hint after the first; a sandbox image that cannot be pulled is found
// in kubelet's event, and nothing else is taken for a pull failure.
func TestReportPullFailures(t *testing.T) {
	t.Parallel() // its own clients; it waits out bounds
	flannel := testPod(DefaultNamespace, "kube-flannel-ds-7xk2p", "uid-flannel", "k3d-sriov-agent-0", FlannelImage)
	crashing := testPod(DefaultNamespace, "kube-multus-ds-q8z4d", "uid-multus", "k3d-sriov-agent-0", MultusImage)
	running := testPod(DefaultNamespace, "kube-sriov-cni-ds-4x7k9", "uid-sriovcni", "k3d-sriov-agent-1", SRIOVCNIImage)
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: SRIOVCNIImage,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	noCNI := testPod("default", "web-0", "uid-web", "k3d-sriov-agent-1", "nginx:1.27")
	cs := fake.NewClientset(flannel, crashing, running, noCNI)
	// Events that are no pull failure of a pod waiting now: a sandbox
	// waiting for the CNI, and an old pull failure of a pod that has run
	// since.
	podEvent(t, cs, noCNI, sandboxEventReason, sandboxNoCNI)
	podEvent(t, cs, running, sandboxEventReason, sandboxPull)

	logf, lines := collectLines()
	// Not scaled: the deadline is the product's input, which its hint
	// reports ("until the wait's timeout in 9m").
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	stop := ReportPullFailures(ctx, cs, logf, "set imageRegistryMirror")
	defer stop()
	setWaiting(t, cs, crashing, "CrashLoopBackOff", "back-off 10s restarting failed container")
	noLine(t, lines, "no pod fails to pull")

	setWaiting(t, cs, flannel, "ErrImagePull", noSuchHost)
	start := time.Now()
	got := nextLine(t, lines)
	t.Logf("reported %s after kubelet's status: %s", time.Since(start).Round(time.Millisecond), got)
	wantAll(t, got, "pod kube-system/kube-flannel-ds-7xk2p", "on k3d-sriov-agent-0", "cannot pull "+FlannelImage, "(container main)",
		"ErrImagePull: ", "lookup ghcr.io on 127.0.0.11:53: no such host")
	wantAll(t, nextLine(t, lines), "set imageRegistryMirror; waiting on", "until the wait's timeout in 9m")

	// kubelet's back-off and its next try are the same failure.
	setWaiting(t, cs, flannel, "ImagePullBackOff", `Back-off pulling image "`+FlannelImage+`": ErrImagePull: `+noSuchHost)
	setWaiting(t, cs, flannel, "ErrImagePull", noSuchHost)
	noLine(t, lines, "the same container was reported already")

	coredns := testPod(DefaultNamespace, "coredns-6799fbcd5-h2x8v", "uid-coredns", "k3d-sriov-server-0", "rancher/mirrored-coredns-coredns:1.12.1")
	if _, err := cs.CoreV1().Pods(DefaultNamespace).Create(t.Context(), coredns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podEvent(t, cs, coredns, sandboxEventReason, sandboxPull)
	wantAll(t, nextLine(t, lines), "pod kube-system/coredns-6799fbcd5-h2x8v on k3d-sriov-server-0 cannot pull "+pauseImage+" (pod sandbox)",
		"FailedCreatePodSandBox: Failed to create pod sandbox")

	for _, r := range []string{"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "ImageInspectError", "RegistryUnavailable", "SignatureValidationFailed"} {
		p := testPod("default", "p-"+strings.ToLower(r), "uid-"+r, "k3d-sriov-agent-1", "example.com/x:1")
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setWaiting(t, cs, p, r, "kubelet's words for "+r)
		wantAll(t, nextLine(t, lines), "pod default/"+p.Name, "cannot pull example.com/x:1", r+": kubelet's words for "+r)
	}
	noLine(t, lines, "nothing new fails")

	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound.Scaled(5 * time.Second)):
		t.Fatal("stop did not end the watches")
	}
}

// The wait's error lists every pod that is not Ready, with why, those
// that cannot pull first, then the images and the hint; Ready and
// finished pods are left out.
func TestWithUnreadyPods(t *testing.T) {
	ready := testPod(DefaultNamespace, "kube-flannel-ds-ready", "u1", "k3d-sriov-server-0", FlannelImage)
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	done := testPod(DefaultNamespace, "helm-install-x", "u2", "k3d-sriov-server-0", "rancher/klipper-helm:v0.9")
	done.Status.Phase = corev1.PodSucceeded
	unscheduled := testPod(DefaultNamespace, "coredns-6799fbcd5-h2x8v", "u3", "", "rancher/mirrored-coredns-coredns:1.12.1")
	unscheduled.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."}}
	pulling := testPod(DefaultNamespace, "kube-multus-ds-q8z4d", "u4", "k3d-sriov-agent-1", MultusImage)
	sandbox := testPod(DefaultNamespace, "local-path-provisioner-x", "u5", "k3d-sriov-server-0", "rancher/local-path-provisioner:v0.0.31")
	cs := fake.NewClientset(ready, done, unscheduled, pulling, sandbox)
	setWaiting(t, cs, pulling, "ImagePullBackOff", `Back-off pulling image "`+MultusImage+`": ErrImagePull: dial tcp: lookup ghcr.io: no such host`)
	podEvent(t, cs, sandbox, sandboxEventReason, sandboxPull)

	err := WithUnreadyPods(t.Context(), cs, errorString("waiting for nodes a, b to be Ready: context deadline exceeded"), "HINT")
	got := err.Error()
	t.Logf("as up prints it:\n%s", got)
	wantAll(t, got, "waiting for nodes a, b to be Ready: context deadline exceeded\npods not Ready (3), those that cannot pull an image first:",
		"pod kube-system/kube-multus-ds-q8z4d on k3d-sriov-agent-1 cannot pull "+MultusImage+" (container main): ImagePullBackOff",
		"pod kube-system/local-path-provisioner-x on k3d-sriov-server-0 cannot pull "+pauseImage+" (pod sandbox)",
		"pod kube-system/coredns-6799fbcd5-h2x8v on (unscheduled): PodScheduled=False Unschedulable: 0/3 nodes are available",
		"images the nodes cannot pull: "+MultusImage+", "+pauseImage+"; HINT")
	if i, j := strings.Index(got, "coredns"), strings.Index(got, "kube-multus"); i < j {
		t.Errorf("a pod that is only unscheduled is listed before one that cannot pull")
	}
	for _, absent := range []string{"kube-flannel-ds-ready", "helm-install-x"} {
		if strings.Contains(got, absent) {
			t.Errorf("%s is Ready or done, yet listed", absent)
		}
	}

	// No pull failure: no hint.
	clean := fake.NewClientset(unscheduled)
	if got := WithUnreadyPods(t.Context(), clean, errorString("x"), "HINT").Error(); strings.Contains(got, "HINT") || !strings.Contains(got, "coredns") {
		t.Errorf("without pull failures:\n%s", got)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// createPod creates p through the API, as the DaemonSet controller would.
func createPod(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	ensureDefaultServiceAccount(t, cs, p.Namespace)
	p = p.DeepCopy()
	p.UID, p.Status = "", corev1.PodStatus{}
	out, err := cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// On a real kube-apiserver (kubelet's reports faked through the status
// subresource and the events API): the watch over every namespace and the
// event watch with its reason field selector are accepted, and the
// reports and the timeout's list are as with the fake clientset.
func TestReportPullFailuresAPIServer(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	flannel := createPod(t, cs, testPod(DefaultNamespace, "kube-flannel-ds-7xk2p", "", "k3d-sriov-agent-0", FlannelImage))
	coredns := createPod(t, cs, testPod(DefaultNamespace, "coredns-6799fbcd5-h2x8v", "", "k3d-sriov-server-0", "rancher/mirrored-coredns-coredns:1.12.1"))
	logf, lines := collectLines()
	stop := ReportPullFailures(t.Context(), cs, logf, "HINT")
	defer stop()
	setWaiting(t, cs, flannel, "ErrImagePull", noSuchHost)
	wantAll(t, nextLine(t, lines), "pod kube-system/kube-flannel-ds-7xk2p on k3d-sriov-agent-0 cannot pull "+FlannelImage+" (container main): ErrImagePull: ", "no such host")
	wantAll(t, nextLine(t, lines), "HINT; waiting on")
	podEvent(t, cs, coredns, sandboxEventReason, sandboxPull)
	wantAll(t, nextLine(t, lines), "pod kube-system/coredns-6799fbcd5-h2x8v on k3d-sriov-server-0 cannot pull "+pauseImage+" (pod sandbox)")
	podEvent(t, cs, coredns, "Scheduled", "Successfully assigned kube-system/coredns-6799fbcd5-h2x8v to k3d-sriov-server-0")
	noLine(t, lines, "only the sandbox's pull failed")

	got := WithUnreadyPods(t.Context(), cs, errorString("waiting: context deadline exceeded"), "HINT").Error()
	wantAll(t, got, "pods not Ready (2)", "kube-flannel-ds-7xk2p on k3d-sriov-agent-0 cannot pull "+FlannelImage,
		"coredns-6799fbcd5-h2x8v on k3d-sriov-server-0 cannot pull "+pauseImage, "images the nodes cannot pull: "+pauseImage+", "+FlannelImage+"; HINT")
}
