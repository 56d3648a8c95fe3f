package reset

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// A webhook reset deleted may still be called for a moment (kube-apiserver
// sees its delete through an informer): what it refused is tried again,
// within blockerGoneGrace; without a deleted blocker a refusal is final.
func TestDeletePlannedRetriesWhatADeletedWebhookRefused(t *testing.T) {
	t.Parallel() // its own clients; it waits out bounds
	webhook := obj("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "ValidatingWebhookConfiguration", "job-webhook", "u-vwc")
	role := obj("rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", "job-reader", "u-cr")
	meta := func(o clusterObject) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: schema.GroupVersion{Group: o.Group, Version: o.Version}.String(), Kind: o.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID},
		}
	}
	// refusing makes a client whose ClusterRole deletes fail the first
	// `refusals` times, as a webhook with failurePolicy Fail and no server.
	refusing := func(t *testing.T, refusals int) (*metadatafake.FakeMetadataClient, *int) {
		scheme := metadatafake.NewTestScheme()
		if err := metav1.AddMetaToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		md := metadatafake.NewSimpleMetadataClient(scheme, meta(webhook), meta(role))
		calls := 0
		md.PrependReactor("delete", "clusterroles", func(k8stesting.Action) (bool, runtime.Object, error) {
			calls++
			if calls <= refusals {
				return true, nil, apierrors.NewInternalError(errors.New(`failed calling webhook "clusterroles.job.example.com": service "gone" not found`))
			}
			return false, nil, nil
		})
		return md, &calls
	}
	inOrder := func(objs []clusterObject) (s []string) {
		for _, o := range objs {
			s = append(s, o.String())
		}
		return s
	}

	t.Run("refused until the webhook is gone", func(t *testing.T) {
		md, calls := refusing(t, 3)
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Blockers: []clusterObject{webhook}, Objects: []clusterObject{role}}, log.Noop)
		if err != nil || *calls != 4 || !slices.Equal(inOrder(deleted), []string{"ValidatingWebhookConfiguration job-webhook", "ClusterRole job-reader"}) {
			t.Fatalf("deleted %v after %d tries: %v", inOrder(deleted), *calls, err)
		}
	})
	t.Run("refused for good", func(t *testing.T) {
		md, calls := refusing(t, 1<<30)
		start := time.Now()
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Blockers: []clusterObject{webhook}, Objects: []clusterObject{role}}, log.Noop)
		if err == nil || !strings.Contains(err.Error(), "deleting ClusterRole job-reader") || !strings.Contains(err.Error(), `service "gone" not found`) ||
			len(deleted) != 1 || *calls < 2 || time.Since(start) < blockerGoneGrace {
			t.Fatalf("deleted %v after %d tries in %v: %v", inOrder(deleted), *calls, time.Since(start), err)
		}
	})
	t.Run("no blocker deleted", func(t *testing.T) {
		md, calls := refusing(t, 1)
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Objects: []clusterObject{role}}, log.Noop)
		if err == nil || len(deleted) != 0 || *calls != 1 {
			t.Fatalf("deleted %v after %d tries: %v", inOrder(deleted), *calls, err)
		}
	})
}
