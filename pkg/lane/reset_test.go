package lane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// obj builds a cluster object of the type named "group/version/resource".
func obj(gvr, kind, name, uid string) clusterObject {
	parts := strings.Split(gvr, "/")
	return clusterObject{objectRef: objectRef{Group: parts[0], Version: parts[1], Resource: parts[2], Kind: kind, Name: name, UID: types.UID(uid)}}
}

func ns(name, uid string) clusterObject { return obj("/v1/namespaces", "Namespace", name, uid) }

func terminating(o clusterObject) clusterObject {
	o.Deleting = true
	return o
}

func withLabels(o clusterObject, kv ...string) clusterObject {
	o.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		o.Labels[kv[i]] = kv[i+1]
	}
	return o
}

func names(objs []clusterObject) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.String())
	}
	slices.Sort(out)
	return out
}

const (
	clusterRoles = "rbac.authorization.k8s.io/v1/clusterroles"
	crds         = "apiextensions.k8s.io/v1/customresourcedefinitions"
)

// The diff at the heart of reset: what a job made goes, what up left and
// what the system makes on its own stays.
func TestPlanResetDeletesWhatIsNotInTheBaseline(t *testing.T) {
	b := &baseline{
		Version: baselineVersion,
		Namespaces: []objectRef{
			ns("default", "u-default").objectRef, ns("kube-system", "u-kube-system").objectRef,
			ns("kube-flannel", "u-flannel").objectRef, ns("gone-lane-ns", "u-gone").objectRef,
		},
		Objects: []objectRef{
			obj(clusterRoles, "ClusterRole", "multus", "u-multus").objectRef,
			obj(clusterRoles, "ClusterRole", "flannel", "u-flannel-cr").objectRef,
			obj(crds, "CustomResourceDefinition", "network-attachment-definitions.k8s.cni.cncf.io", "u-nad").objectRef,
		},
		Unlisted: []string{"metrics.k8s.io/v1beta1"},
	}
	st := &apiState{
		Namespaces: []clusterObject{
			ns("default", "u-default"), ns("kube-system", "u-kube-system"), ns("kube-flannel", "u-flannel"),
			// kube-apiserver's own, made after the baseline: never deleted.
			ns("kube-node-lease", "u-new-lease"),
			ns("job-1", "u-job-1"),
			terminating(ns("job-0", "u-job-0")),
			// Deleted and made again by a job: its content is the job's.
			ns("gone-lane-ns", "u-gone-again"),
		},
		Objects: []clusterObject{
			obj(clusterRoles, "ClusterRole", "multus", "u-multus"),
			// Re-applied by a job under the same name: the lane needs it.
			obj(clusterRoles, "ClusterRole", "flannel", "u-flannel-cr-2"),
			obj(clusterRoles, "ClusterRole", "job-reader", "u-job-reader"),
			obj(clusterRoles, "ClusterRole", "system:controller:new", "u-sys"),
			obj("rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding", "job-reader", "u-job-crb"),
			obj("scheduling.k8s.io/v1/priorityclasses", "PriorityClass", "system-node-critical", "u-pc-sys"),
			obj("scheduling.k8s.io/v1/priorityclasses", "PriorityClass", "job-high", "u-pc-job"),
			obj("/v1/nodes", "Node", "k3d-sriov-agent-0", "u-node-again"),
			obj("certificates.k8s.io/v1/certificatesigningrequests", "CertificateSigningRequest", "csr-x", "u-csr"),
			obj("k3s.cattle.io/v1/etcdsnapshotfiles", "ETCDSnapshotFile", "snap", "u-snap"),
			obj("crd.projectcalico.org/v1/ipamhandles", "IPAMHandle", "k8s-pod-network.x", "u-handle"),
			withLabels(obj("apiregistration.k8s.io/v1/apiservices", "APIService", "v1.kubevirt.io", "u-as-crd"), apiServiceManagedLabel, "true"),
			obj("apiregistration.k8s.io/v1/apiservices", "APIService", "v1.subresources.kubevirt.io", "u-as-agg"),
			obj("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "ValidatingWebhookConfiguration", "virt-api-validator", "u-vwc"),
			obj(crds, "CustomResourceDefinition", "network-attachment-definitions.k8s.cni.cncf.io", "u-nad"),
			obj(crds, "CustomResourceDefinition", "kubevirts.kubevirt.io", "u-crd-kv"),
			terminating(obj(crds, "CustomResourceDefinition", "olds.example.com", "u-crd-old")),
			// Cluster-scoped custom resources: those of a CRD that goes, go with it.
			obj("kubevirt.io/v1/kubevirts", "KubeVirt", "cluster-wide", "u-kv-cr"),
			obj("example.com/v1/olds", "Old", "o1", "u-old-cr"),
			obj("k8s.cni.cncf.io/v1/clusterthings", "ClusterThing", "t1", "u-thing"),
			// Not read for the baseline: nothing to tell it by.
			obj("metrics.k8s.io/v1beta1/nodemetrics", "NodeMetrics", "m", "u-metrics"),
		},
		ListErrors: map[schema.GroupVersionResource]error{
			{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}: errors.New("conversion webhook down"),
		},
	}
	p := planReset(b, st)
	check := func(what string, got []clusterObject, want ...string) {
		t.Helper()
		slices.Sort(want)
		if g := names(got); !slices.Equal(g, want) {
			t.Errorf("%s: %q, want %q", what, g, want)
		}
	}
	check("blockers", p.Blockers, "APIService v1.subresources.kubevirt.io", "ValidatingWebhookConfiguration virt-api-validator")
	check("namespaces", p.Namespaces, "namespace gone-lane-ns", "namespace job-1")
	check("objects", p.Objects, "ClusterRole job-reader", "ClusterRoleBinding job-reader", "PriorityClass job-high", "ClusterThing t1")
	check("CRDs", p.CRDs, "CustomResourceDefinition kubevirts.kubevirt.io")
	check("terminating", p.Terminating, "namespace job-0", "CustomResourceDefinition olds.example.com")
	check("replaced", p.Replaced, "ClusterRole flannel")
	if len(p.Lost) != 1 || !strings.Contains(p.Lost[0], "gone-lane-ns") {
		t.Errorf("lost %q: want the baseline namespace a job deleted", p.Lost)
	}
	if err := p.unreadableErr(); err != nil {
		t.Errorf("a type whose CRD goes need not be read: %v", err)
	}

	// Deletes in order: what blocks first, CRDs last.
	var order []string
	for _, o := range p.deletes() {
		order = append(order, o.Resource)
	}
	if first, last := order[0], order[len(order)-1]; first != "apiservices" && first != "validatingwebhookconfigurations" || last != "customresourcedefinitions" {
		t.Errorf("delete order %v: want blockers first, CRDs last", order)
	}
	if i, j := slices.Index(order, "namespaces"), slices.Index(order, "clusterroles"); i < 0 || j < i {
		t.Errorf("delete order %v: want namespaces before the other objects", order)
	}

	// What to wait for: everything deleted or already going.
	nsWait, objWait := p.waitFor(p.deletes())
	if len(nsWait) != 3 || len(objWait) != len(p.deletes())-2+1 {
		t.Errorf("waits for namespaces %v and objects %v", nsWait, objWait)
	}
	for _, r := range nsWait {
		if !r.isNamespace() {
			t.Errorf("%s among the namespaces to wait for", r)
		}
	}
}

// A type reset cannot list makes it refuse to act: a lane that only looks
// reset is worse than a failed reset.
func TestPlanResetRefusesWhatItCannotRead(t *testing.T) {
	st := &apiState{ListErrors: map[schema.GroupVersionResource]error{
		{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}: errors.New("boom"),
	}}
	p := planReset(&baseline{Version: baselineVersion}, st)
	if err := p.unreadableErr(); err == nil || !strings.Contains(err.Error(), "storageclasses") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("unreadable type: %v", err)
	}
}

func TestWaitNamespacesGone(t *testing.T) {
	defer func(d time.Duration) { resetPollInterval = d }(resetPollInterval)
	resetPollInterval = 10 * time.Millisecond
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
			cs.CoreV1().Namespaces().Delete(context.Background(), "job-1", metav1.DeleteOptions{})
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := waitNamespacesGone(ctx, cs, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("made again under its name counts as gone", func(t *testing.T) {
		again := job.DeepCopy()
		again.UID, again.DeletionTimestamp = "u-job-1-again", nil
		cs := fake.NewClientset(again)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := waitNamespacesGone(ctx, cs, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("still terminating", func(t *testing.T) {
		cs := fake.NewClientset(job.DeepCopy())
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		err := waitNamespacesGone(ctx, cs, refs)
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

func TestLoadBaselineOfALaneWithoutOne(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	_, err := loadBaseline(l)
	if !errors.Is(err, errNoBaseline) || !strings.Contains(err.Error(), "down --name "+l.Name) || !strings.Contains(err.Error(), "up") {
		t.Fatalf("%v", err)
	}
	if err := os.MkdirAll(l.Dir().Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &baseline{Version: baselineVersion, Namespaces: []objectRef{ns("default", "u1").objectRef}}
	if err := saveBaseline(l, b); err != nil {
		t.Fatal(err)
	}
	got, err := loadBaseline(l)
	if err != nil || len(got.Namespaces) != 1 || got.Namespaces[0].UID != "u1" {
		t.Fatalf("%+v, %v", got, err)
	}
	if left, _ := os.ReadDir(l.Dir().Path()); len(left) != 1 || left[0].Name() != filepath.Base(l.Dir().Baseline()) {
		t.Errorf("the lane dir holds %v, want the baseline alone (no temporary file left behind)", left)
	}
}

func TestWaitObjectsGone(t *testing.T) {
	defer func(d time.Duration) { resetPollInterval = d }(resetPollInterval)
	resetPollInterval = 10 * time.Millisecond
	crd := func(uid types.UID) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: uid, DeletionTimestamp: &metav1.Time{Time: time.Now()},
				Finalizers: []string{"customresourcecleanup.apiextensions.k8s.io"}},
		}
	}
	refs := []objectRef{obj(crds, "CustomResourceDefinition", "widgets.example.com", "u-w").objectRef}
	gvr := refs[0].gvr()
	client := func() *metadatafake.FakeMetadataClient {
		scheme := metadatafake.NewTestScheme()
		metav1.AddMetaToScheme(scheme)
		return metadatafake.NewSimpleMetadataClient(scheme, crd("u-w"))
	}

	t.Run("gone", func(t *testing.T) {
		md := client()
		go func() {
			time.Sleep(50 * time.Millisecond)
			md.Resource(gvr).Delete(context.Background(), "widgets.example.com", metav1.DeleteOptions{})
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := waitObjectsGone(ctx, md, refs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("held by its finalizer", func(t *testing.T) {
		md := client()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		err := waitObjectsGone(ctx, md, refs)
		if err == nil || !strings.Contains(err.Error(), "CustomResourceDefinition widgets.example.com: being deleted, finalizers [customresourcecleanup.apiextensions.k8s.io]") {
			t.Fatalf("%v", err)
		}
	})
}

// A webhook reset deleted may still be called for a moment (kube-apiserver
// sees its delete through an informer): what it refused is tried again,
// within blockerGoneGrace; without a deleted blocker a refusal is final.
func TestDeletePlannedRetriesWhatADeletedWebhookRefused(t *testing.T) {
	defer func(d, g time.Duration) { resetPollInterval, blockerGoneGrace = d, g }(resetPollInterval, blockerGoneGrace)
	resetPollInterval, blockerGoneGrace = 5*time.Millisecond, 500*time.Millisecond
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
	refusing := func(refusals int) (*metadatafake.FakeMetadataClient, *int) {
		scheme := metadatafake.NewTestScheme()
		metav1.AddMetaToScheme(scheme)
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
	nolog := func(string, ...any) {}

	t.Run("refused until the webhook is gone", func(t *testing.T) {
		md, calls := refusing(3)
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Blockers: []clusterObject{webhook}, Objects: []clusterObject{role}}, nolog)
		if err != nil || *calls != 4 || !slices.Equal(inOrder(deleted), []string{"ValidatingWebhookConfiguration job-webhook", "ClusterRole job-reader"}) {
			t.Fatalf("deleted %v after %d tries: %v", inOrder(deleted), *calls, err)
		}
	})
	t.Run("refused for good", func(t *testing.T) {
		md, calls := refusing(1 << 30)
		start := time.Now()
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Blockers: []clusterObject{webhook}, Objects: []clusterObject{role}}, nolog)
		if err == nil || !strings.Contains(err.Error(), "deleting ClusterRole job-reader") || !strings.Contains(err.Error(), `service "gone" not found`) ||
			len(deleted) != 1 || *calls < 2 || time.Since(start) < blockerGoneGrace {
			t.Fatalf("deleted %v after %d tries in %v: %v", inOrder(deleted), *calls, time.Since(start), err)
		}
	})
	t.Run("no blocker deleted", func(t *testing.T) {
		md, calls := refusing(1)
		deleted, err := deletePlanned(t.Context(), md, resetPlan{Objects: []clusterObject{role}}, nolog)
		if err == nil || len(deleted) != 0 || *calls != 1 {
			t.Fatalf("deleted %v after %d tries: %v", inOrder(deleted), *calls, err)
		}
	})
}
