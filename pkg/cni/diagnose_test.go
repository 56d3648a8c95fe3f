package cni

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWritePodShowsFailedContainersLogs: a crash-looping container and
// one that exited non-zero get their last log lines in the diagnosis
// (the fake clientset serves every log as "fake logs"); a container
// that exited 0 or is waiting for its first start does not.
func TestWritePodShowsFailedContainersLogs(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "done", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "looping", RestartCount: 3, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				{Name: "exited", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}},
				{Name: "pulling", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			},
		},
	}
	var b strings.Builder
	WritePod(t.Context(), &b, fake.NewClientset(), pod, "")
	out := b.String()
	blocks := map[string]bool{}
	var current string
	for line := range strings.SplitSeq(out, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "container "); ok {
			current = strings.Fields(name)[0]
		}
		if strings.TrimSpace(line) == "fake logs" {
			blocks[current] = true
		}
	}
	for name, want := range map[string]bool{"looping": true, "exited": true, "done": false, "pulling": false} {
		if blocks[name] != want {
			t.Errorf("log lines of container %s shown: %v, want %v", name, blocks[name], want)
		}
	}
	if t.Failed() {
		t.Logf("diagnosis:\n%s", out)
	}
}
