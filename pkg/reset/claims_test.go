package reset

import (
	"context"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// In a namespace reset keeps, the claim templates and the claims a job
// made since the baseline go; a pod's claim stays with its pod, and what
// was there at the baseline stays.
func TestDeleteJobClaims(t *testing.T) {
	recorded := time.Date(2026, 12, 4, 12, 0, 0, 500e6, time.UTC)
	meta := func(name string, created time.Time, podOwned bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)}
		if podOwned {
			m.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "p", APIVersion: "v1", UID: "pod"}}
		}
		return m
	}
	after, before, sameSecond := recorded.Add(time.Minute), recorded.Add(-time.Minute), recorded.Add(-100*time.Millisecond)
	objs := []runtime.Object{
		&resourcev1.ResourceClaimTemplate{ObjectMeta: meta("job-tmpl", after, false)},
		&resourcev1.ResourceClaimTemplate{ObjectMeta: meta("old-tmpl", before, false)},
		&resourcev1.ResourceClaim{ObjectMeta: meta("job-claim", after, false)},
		&resourcev1.ResourceClaim{ObjectMeta: meta("same-second", sameSecond, false)},
		&resourcev1.ResourceClaim{ObjectMeta: meta("pod-claim", after, true)},
		&resourcev1.ResourceClaim{ObjectMeta: meta("old-claim", before, false)},
	}
	cs := fake.NewClientset(objs...)
	ctx := context.Background()
	deleted, err := deleteJobClaims(ctx, cs, []string{"default"}, recorded, log.Noop)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range deleted {
		got = append(got, c.String())
	}
	want := []string{"ResourceClaimTemplate default/job-tmpl", "ResourceClaim default/job-claim", "ResourceClaim default/same-second"}
	if len(got) != len(want) {
		t.Fatalf("deleted %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("deleted %v, want %v", got, want)
		}
	}
	for _, name := range []string{"pod-claim", "old-claim"} {
		if _, err := cs.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v, want kept", name, err)
		}
	}
	if _, err := cs.ResourceV1().ResourceClaims("default").Get(ctx, "job-claim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job-claim: %v, want deleted", err)
	}
	if err := waitClaimsGone(ctx, cs, deleted); err != nil {
		t.Errorf("waiting for deleted claims: %v", err)
	}
}
