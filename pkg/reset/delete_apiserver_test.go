package reset

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/apiserver"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// Reset's delete phase against a real kube-apiserver: the baseline up
// records, then what a job makes after it (a namespace with a ConfigMap, a
// ClusterRole, a CRD with a custom resource, a PriorityClass, and a webhook
// that refuses every ClusterRole delete while its server is gone) is
// deleted, and what the baseline holds is not. There is no
// kube-controller-manager here, so the job's namespace stays Terminating:
// the wait for it times out and says what holds it.
func TestResetDeletesWhatCameAfterTheBaseline(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, kc := apiserver.ClientsForTest(t, kube.ForConfig)
	dyn, cs := kc.Dynamic, kc.Typed
	ctx := t.Context()

	// What up makes: the CNI's namespace, ClusterRoles, the NAD CRD.
	mkNamespace(t, cs, "kube-flannel")
	mkClusterRole(t, cs, "multus")
	mkCRD(t, dyn, "k8s.cni.cncf.io", "network-attachment-definitions", "NetworkAttachmentDefinition", "Namespaced")

	b, err := Record(ctx, kc, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l := config.Default()
	l.StateDir = t.TempDir()
	if err := os.MkdirAll(l.Dir().Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Save(l.Dir(), b); err != nil {
		t.Fatal(err)
	}
	if b, err = Load(l.Name, l.Dir()); err != nil {
		t.Fatal(err)
	}
	kept := map[string]types.UID{}
	for _, r := range slices.Concat(b.Namespaces, b.Objects) {
		kept[r.String()] = r.UID
	}
	for _, want := range []string{"namespace default", "namespace kube-system", "namespace kube-flannel", "ClusterRole multus",
		"ClusterRole cluster-admin", "CustomResourceDefinition network-attachment-definitions.k8s.cni.cncf.io", "PriorityClass system-node-critical"} {
		if kept[want] == "" {
			t.Errorf("baseline lacks %s", want)
		}
	}
	if len(b.Unlisted) > 0 {
		t.Errorf("baseline did not read %v", b.Unlisted)
	}

	// What a job makes.
	mkNamespace(t, cs, "job-1")
	if _, err := cs.CoreV1().ConfigMaps("job-1").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkClusterRole(t, cs, "job-reader")
	mkClusterRole(t, cs, "system:job-made")
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "job-high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widgets := mkCRD(t, dyn, "example.com", "widgets", "Widget", "Cluster")
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1"}}}
	if _, err := dyn.Resource(widgets).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its server lived in job-1: deleting a ClusterRole fails until the
	// webhook itself is gone.
	fail, none, path := admissionv1.Fail, admissionv1.SideEffectClassNone, "/validate"
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "job-webhook"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "clusterroles.job.example.com",
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "job-1", Name: "gone", Path: &path}},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{"rbac.authorization.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"clusterroles"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kube-apiserver picks the webhook up from an informer, a moment after
	// the create: probe with dry-run deletes (a webhook without side
	// effects is called on those too) until it refuses. Each probe runs on
	// the test's ctx, not the poll's: one cut short by the poll's timeout
	// (or by the rate limiter's wait against it) would read as a refusal.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound.Scaled(15*time.Second), true, func(context.Context) (bool, error) {
		return cs.RbacV1().ClusterRoles().Delete(ctx, "job-reader", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}) != nil, nil
	}); err != nil {
		t.Fatal("the webhook did not refuse a ClusterRole delete in 15 s: the order of reset's deletes goes untested")
	}
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, "job-reader", metav1.DeleteOptions{}); err == nil {
		t.Fatal("the webhook refused a dry-run delete but let a real one through")
	}

	p, deleted, err := deletePass(ctx, kc, b, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range deleted {
		got = append(got, o.String())
	}
	slices.Sort(got)
	want := []string{"ClusterRole job-reader", "CustomResourceDefinition widgets.example.com", "PriorityClass job-high",
		"ValidatingWebhookConfiguration job-webhook", "namespace job-1"}
	if !slices.Equal(got, want) {
		t.Errorf("deleted %q, want %q", got, want)
	}

	gone := func(what string, err error) {
		t.Helper()
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s not deleted: %v", what, err)
		}
	}
	_, err = cs.RbacV1().ClusterRoles().Get(ctx, "job-reader", metav1.GetOptions{})
	gone("ClusterRole job-reader", err)
	_, err = cs.SchedulingV1().PriorityClasses().Get(ctx, "job-high", metav1.GetOptions{})
	gone("PriorityClass job-high", err)
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "system:job-made", metav1.GetOptions{}); err != nil {
		t.Errorf("a system: ClusterRole was deleted: %v", err)
	}
	// No controller-manager: the namespace is Terminating, and stays so.
	job, err := cs.CoreV1().Namespaces().Get(ctx, "job-1", metav1.GetOptions{})
	if err != nil || job.DeletionTimestamp == nil || job.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("namespace job-1 not Terminating: %+v, %v", job.Status, err)
	}
	// The CRD's finalizer runs in kube-apiserver: it goes, with its widget.
	nsWait, objWait := p.waitFor(deleted)
	if err := waitObjectsGone(bounded(t, 30*time.Second), kc.Metadata, objWait); err != nil {
		t.Error(err)
	}
	_, err = dyn.Resource(widgets).Get(ctx, "w1", metav1.GetOptions{})
	gone("Widget w1, with its CRD", err)

	// What the baseline holds is untouched: same UIDs, none being deleted.
	st, err := readCluster(ctx, kc, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := map[string]clusterObject{}
	for _, o := range slices.Concat(st.Namespaces, st.Objects) {
		now[o.String()] = o
	}
	for name, uid := range kept {
		o, ok := now[name]
		if !ok || o.UID != uid || o.Deleting {
			t.Errorf("baseline's %s: now %+v (present %v), want UID %s, not being deleted", name, o, ok, uid)
		}
	}

	// The wait for the namespace ends at its bound and names what holds it.
	err = waitNamespacesGone(bounded(t, time.Second), cs, nsWait)
	if err == nil || !strings.Contains(err.Error(), "namespace job-1") || !strings.Contains(err.Error(), "finalizers [kubernetes]") {
		t.Errorf("wait for a namespace no controller empties: %v", err)
	}

	// A second pass deletes nothing more and still waits for job-1.
	p, deleted, err = deletePass(ctx, kc, b, testLogger(t))
	if err != nil || len(deleted) != 0 {
		t.Fatalf("second pass deleted %v: %v", deleted, err)
	}
	if nsWait, _ := p.waitFor(deleted); len(nsWait) != 1 || nsWait[0].Name != "job-1" {
		t.Errorf("second pass waits for %v, want job-1", nsWait)
	}
}

func mkNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mkClusterRole(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mkCRD creates a CRD with one served version v1 that takes any object,
// and waits until it is established.
func mkCRD(t *testing.T, dyn dynamic.Interface, group, plural, kind, scope string) schema.GroupVersionResource {
	t.Helper()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": scope,
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := dyn.Resource(crds).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lastErr error // the last Get's error: why the CRD was not seen established
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bound.Scaled(30*time.Second), true, func(context.Context) (bool, error) {
		u, err := dyn.Resource(crds).Get(t.Context(), plural+"."+group, metav1.GetOptions{})
		if lastErr = err; err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("CRD %s.%s not established: %v", plural, group, lastErr)
	}
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
}
