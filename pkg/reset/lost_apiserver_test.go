package reset

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/apiserver"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// Lost against a real kube-apiserver: not for the cluster the baseline was
// recorded on, even after a job deleted and remade a namespace of it; lost
// once the server came back on an empty datastore with its credentials, as
// a k3s server restarted with its datastore on a tmpfs does.
func TestLostWhenTheDatastoreCameBackEmpty(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	ctx := t.Context()
	opts := apiserver.TestOptions(t)
	opts.Dir, opts.Token = t.TempDir(), "lost-token"
	opts.EtcdDir = filepath.Join(t.TempDir(), "db", "etcd")
	first, err := apiserver.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	kc, err := kube.ForConfig(first.Config)
	if err != nil {
		t.Fatal(err)
	}
	mkNamespace(t, kc.Typed, "kube-flannel")
	b, err := Record(ctx, kc, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if lost, err := Lost(ctx, kc, b); err != nil || lost {
		t.Fatalf("Lost on the baseline's own cluster = %t, %v", lost, err)
	}
	// A job deletes a namespace up made and makes it again: new UID, and
	// the cluster is still the baseline's. (No kube-controller-manager
	// here: the namespace's finalizer is removed by hand.)
	if err := kc.Typed.CoreV1().Namespaces().Delete(ctx, "kube-flannel", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound.Scaled(30*time.Second), true, func(ctx context.Context) (bool, error) {
		ns, err := kc.Typed.CoreV1().Namespaces().Get(ctx, "kube-flannel", metav1.GetOptions{})
		if err != nil {
			return true, nil
		}
		ns.Spec.Finalizers = nil
		_, _ = kc.Typed.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		return false, nil
	})
	if err != nil {
		t.Fatalf("deleting namespace kube-flannel: %v", err)
	}
	mkNamespace(t, kc.Typed, "kube-flannel")
	if lost, err := Lost(ctx, kc, b); err != nil || lost {
		t.Fatalf("Lost after a job remade a namespace = %t, %v", lost, err)
	}

	first.Stop()
	if err := os.RemoveAll(opts.EtcdDir); err != nil {
		t.Fatal(err)
	}
	second, err := apiserver.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Stop)
	// kube-apiserver makes default, kube-system, kube-public and
	// kube-node-lease again on its own (its system namespaces controller).
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound.Scaled(30*time.Second), true, func(ctx context.Context) (bool, error) {
		_, err := kc.Typed.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kube-system on the restarted server: %v", err)
	}
	if lost, err := Lost(ctx, kc, b); err != nil || !lost {
		t.Fatalf("Lost after the datastore came back empty = %t, %v; want true", lost, err)
	}
}
