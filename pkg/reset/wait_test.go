package reset

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestWaitNamespacesGone(t *testing.T) {
	job := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "job-1", UID: "u-job-1", DeletionTimestamp: &metav1.Time{Time: time.Now()}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating, Conditions: []corev1.NamespaceCondition{
			{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Message: "Some resources are remaining: pods. has 1 resource instances"},
			{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionFalse, Message: "All resources successfully discovered"},
		}},
	}
	refs := []objectRef{ns("job-1", "u-job-1").objectRef}

	t.Run("gone", func(t *testing.T) {
		cs := fake.NewClientset(job.DeepCopy())
		go func() {
			time.Sleep(50 * time.Millisecond)
			if err := cs.CoreV1().Namespaces().Delete(context.Background(), "job-1", metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting the namespace waited for: %v", err)
			}
		}()
		if err := waitNamespacesGone(bounded(t, 5*time.Second), cs, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("made again under its name counts as gone", func(t *testing.T) {
		again := job.DeepCopy()
		again.UID, again.DeletionTimestamp = "u-job-1-again", nil
		cs := fake.NewClientset(again)
		if err := waitNamespacesGone(bounded(t, 5*time.Second), cs, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("still terminating", func(t *testing.T) {
		cs := fake.NewClientset(job.DeepCopy())
		err := waitNamespacesGone(bounded(t, 100*time.Millisecond), cs, refs)
		if err == nil {
			t.Fatal("no error while the namespace is still there")
		}
		for _, want := range []string{"namespace job-1", "Terminating", "finalizers [kubernetes]", "NamespaceContentRemaining: Some resources are remaining: pods"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
		if strings.Contains(err.Error(), "NamespaceDeletionDiscoveryFailure") {
			t.Errorf("error names a condition that is false:\n%v", err)
		}
	})
}

func TestWaitObjectsGone(t *testing.T) {
	crd := func(uid types.UID) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: uid, DeletionTimestamp: &metav1.Time{Time: time.Now()},
				Finalizers: []string{"customresourcecleanup.apiextensions.k8s.io"}},
		}
	}
	refs := []objectRef{obj(crds, "CustomResourceDefinition", "widgets.example.com", "u-w").objectRef}
	gvr := refs[0].gvr()
	client := func(t *testing.T) *metadatafake.FakeMetadataClient {
		scheme := metadatafake.NewTestScheme()
		if err := metav1.AddMetaToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		return metadatafake.NewSimpleMetadataClient(scheme, crd("u-w"))
	}

	t.Run("gone", func(t *testing.T) {
		md := client(t)
		go func() {
			time.Sleep(50 * time.Millisecond)
			if err := md.Resource(gvr).Delete(context.Background(), "widgets.example.com", metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting the CRD waited for: %v", err)
			}
		}()
		if err := waitObjectsGone(bounded(t, 5*time.Second), md, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("held by its finalizer", func(t *testing.T) {
		md := client(t)
		err := waitObjectsGone(bounded(t, 100*time.Millisecond), md, refs)
		if err == nil || !strings.Contains(err.Error(), "CustomResourceDefinition widgets.example.com: being deleted, finalizers [customresourcecleanup.apiextensions.k8s.io]") {
			t.Fatalf("%v", err)
		}
	})
}
