package smoke

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

func smokePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName, Namespace: "default", UID: "uid-1"},
		Spec:       corev1.PodSpec{NodeName: "k3d-sriov-agent-0"},
	}
}

func TestSmokeFailureNamesPodCheckAndEvents(t *testing.T) {
	cs := fake.NewClientset(smokePod(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: PodName},
		Type:           corev1.EventTypeNormal, Reason: "AddedInterface", Message: "Add net1 [10.56.217.2/24] from default/sriov-lane-smoke",
		LastTimestamp: metav1.Now(),
	})
	ce := &CheckError{Check: CheckVFIODevice, Expected: "char devices /dev/vfio/<group> and /dev/vfio/vfio", Found: "char devices: none"}
	err := smokeFailure(t.Context(), cs, smokePod(), ce)
	for _, want := range []string{
		`smoke pod default/sriov-lane-smoke on node k3d-sriov-agent-0: check "vfio device" failed: expected char devices /dev/vfio/<group> and /dev/vfio/vfio; found char devices: none`,
		"last events:", "Normal AddedInterface: Add net1 [10.56.217.2/24] from default/sriov-lane-smoke",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	var got *CheckError
	if !errors.As(err, &got) || got != ce {
		t.Errorf("the CheckError is not wrapped: %v", err)
	}
}

// kubeletDeletes makes pod deletes graceful, as with a kubelet: the pod
// stays until release is called. watching is closed once the deleter's
// watch is registered with the tracker (made here as the fake's own watch
// reactor makes it, k8s.io/client-go
// kubernetes/fake/clientset_generated.go@v0.37.2), so a release after it
// is an event the deleter sees.
func kubeletDeletes(cs *fake.Clientset) (watching <-chan struct{}, release func()) {
	w := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		wi, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		once.Do(func() { close(w) })
		return true, wi, nil
	})
	cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	return w, func() {
		if err := cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", PodName); err != nil {
			panic(err)
		}
	}
}

func TestDeleteSmokePodWaitsUntilGone(t *testing.T) {
	cs := fake.NewClientset(smokePod())
	watching, release := kubeletDeletes(cs)
	released := make(chan time.Time, 1)
	go func() {
		<-watching
		released <- time.Now()
		release()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(10*time.Second))
	defer cancel()
	existed, err := DeletePod(ctx, cs, "default")
	if err != nil || !existed {
		t.Fatalf("DeletePod = %v, %v", existed, err)
	}
	select {
	case <-released:
	default:
		t.Fatal("returned before the pod was gone")
	}
}

func TestDeleteSmokePodWithoutPod(t *testing.T) {
	existed, err := DeletePod(t.Context(), fake.NewClientset(), "default")
	if err != nil || existed {
		t.Fatalf("DeletePod = %v, %v; want false, nil", existed, err)
	}
}

func TestDeleteSmokePodTimeoutSaysWhy(t *testing.T) {
	cs := fake.NewClientset(smokePod())
	kubeletDeletes(cs) // never released
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(300*time.Millisecond))
	defer cancel()
	_, err := DeletePod(ctx, cs, "default")
	if err == nil || !strings.Contains(err.Error(), "its VF is not free until then") || !strings.Contains(err.Error(), "pod default/sriov-lane-smoke on k3d-sriov-agent-0") {
		t.Fatalf("err = %v", err)
	}
}

// The checks start from a Ready pod; one that is not fails before any exec.
func TestVerifySmokeNeedsReadyPod(t *testing.T) {
	p := smokePod()
	p.Status.Phase = corev1.PodPending
	cs := fake.NewClientset(p)
	o := testOptions()
	var lines []string
	_, err := Verify(t.Context(), &kube.Clients{Typed: cs}, o, func(check, found string) { lines = append(lines, check) })
	wantCheck(t, err, CheckPodReady, "expected a Ready pod; found phase Pending, not Ready", "on node k3d-sriov-agent-0")
	if len(lines) != 0 {
		t.Errorf("reported %v before the pod was Ready", lines)
	}
}
