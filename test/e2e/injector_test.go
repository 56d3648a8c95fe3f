package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

const (
	networksAnnotation     = "k8s.v1.cni.cncf.io/networks"
	resourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"
)

var nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// checkInjector: network-resources-injector on a lane up with it, with
// real pods. up deployed the component with a certificate it made, the
// webhook trusts exactly that CA, the key is nowhere but the Secret, up
// returned with the injector's Deployment Available, and a pod created
// then that names a NetworkAttachmentDefinition backed by the lane's
// resource gets one of it as request and limit from the webhook. With the
// injector scaled to zero, pods are still admitted, unchanged
// (failurePolicy Ignore): it leaves the injector down.
func checkInjector(t *testing.T, l *lane, cfg *rest.Config, upOutput string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()

	// up returned: the Deployment is Available with every replica.
	dep, err := cs.AppsV1().Deployments(cni.InjectorNamespace).Get(ctx, cni.InjectorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !deploymentAvailable(dep) || dep.Status.AvailableReplicas != ptr.Deref(dep.Spec.Replicas, 1) {
		t.Errorf("up returned with the injector not Available: replicas %d, available %d, conditions %v",
			ptr.Deref(dep.Spec.Replicas, 1), dep.Status.AvailableReplicas, dep.Status.Conditions)
	}

	checkInjectorCert(t, cs, upOutput, l.cfg.StateDir)

	// A pod that names a NetworkAttachmentDefinition of the lane's
	// resource, asking for no resources, gets one from the injector.
	ns := "injector-e2e"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefaultServiceAccount(t, cs, ns)
	resName := l.cfg.Resource()
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1",
		"kind":       "NetworkAttachmentDefinition",
		"metadata": map[string]any{
			"name":        "injector-sriov",
			"namespace":   ns,
			"annotations": map[string]any{resourceNameAnnotation: resName},
		},
		"spec": map[string]any{"config": `{"cniVersion":"0.3.1","name":"injector-sriov","type":"sriov"}`},
	}}
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(nadGVR).Namespace(ns).Create(ctx, nad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, networkPod(l, "injected", "injector-sriov"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod refused: %v", err)
	}
	res0 := pod.Spec.Containers[0].Resources
	one := resource.MustParse("1")
	rn := corev1.ResourceName(resName)
	if q, ok := res0.Requests[rn]; !ok || q.Cmp(one) != 0 {
		t.Errorf("pod's container requests %v, want %s: 1 (injected)", res0.Requests, resName)
	}
	if q, ok := res0.Limits[rn]; !ok || q.Cmp(one) != 0 {
		t.Errorf("pod's container limits %v, want %s: 1 (injected)", res0.Limits, resName)
	}
	if t.Failed() {
		logInjector(t, cs)
	}

	// The injector down (scaled to zero, its pods gone): a pod naming the
	// same network is still admitted, unchanged.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: cni.InjectorName, Namespace: cni.InjectorNamespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if _, err := cs.AppsV1().Deployments(cni.InjectorNamespace).UpdateScale(ctx, cni.InjectorName, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, bound.Scaled(2*time.Minute), true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(cni.InjectorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + cni.InjectorName})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatalf("injector pods still there after scaling to 0: %v", err)
	}
	pod, err = cs.CoreV1().Pods(ns).Create(ctx, networkPod(l, "injector-down", "injector-sriov"), metav1.CreateOptions{})
	if err != nil {
		t.Errorf("pod refused while the injector is down: %v", err)
	} else if r := pod.Spec.Containers[0].Resources; len(r.Requests) != 0 || len(r.Limits) != 0 {
		t.Errorf("pod mutated while the injector is down: %v", r)
	}
}

// checkInjectorCert: the Secret holds a serving certificate for the
// injector's Service and its key, the webhook's caBundle is the CA that
// signed it, and the key is in no output of up and no file of the lane.
func checkInjectorCert(t *testing.T, cs kubernetes.Interface, upOutput, stateDir string) {
	t.Helper()
	ctx := t.Context()
	s, err := cs.CoreV1().Secrets(cni.InjectorNamespace).Get(ctx, cni.InjectorSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cni.InjectorWebhookConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caBundle := mwc.Webhooks[0].ClientConfig.CABundle
	if !bytes.Equal(caBundle, s.Data["ca.crt"]) {
		t.Error("the webhook's caBundle is not the Secret's CA")
	}
	blk, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if blk == nil {
		t.Fatal("no certificate in the Secret (placeholder applied?)")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		t.Fatal("caBundle holds no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: cni.InjectorService + "." + cni.InjectorNamespace + ".svc", Roots: roots}); err != nil {
		t.Errorf("serving certificate against caBundle: %v", err)
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("key does not match: %v", err)
	}

	key := strings.TrimSpace(string(s.Data[corev1.TLSPrivateKeyKey]))
	keyLine := strings.Split(key, "\n")[1]
	if strings.Contains(upOutput, "PRIVATE KEY") || strings.Contains(upOutput, keyLine) {
		t.Error("up printed the webhook key")
	}
	_ = filepath.WalkDir(stateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(keyLine)) {
			t.Errorf("%s holds the webhook key", p)
		}
		return nil
	})
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitDefaultServiceAccount waits for kube-controller-manager to give a new
// namespace its default ServiceAccount, without which pods are refused.
func waitDefaultServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, bound.Scaled(time.Minute), true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("no default ServiceAccount in %s: %v", ns, err)
	}
}

// networkPod names network in k8s.v1.cni.cncf.io/networks and asks for no
// resources.
func networkPod(l *lane, name, network string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{networksAnnotation: network}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name:    "c",
				Image:   cni.MirrorImage(l.cfg.ImageRegistryMirror, cni.SmokeImage),
				Command: []string{"sleep", "3600"},
			}},
		},
	}
}

// logInjector logs the injector pods' logs, to tell a webhook that was not
// called from one that declined.
func logInjector(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(20*time.Second))
	defer cancel()
	pods, err := cs.CoreV1().Pods(cni.InjectorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + cni.InjectorName})
	if err != nil {
		t.Logf("listing injector pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](40)}).DoRaw(ctx)
		t.Logf("injector pod %s on %s (%s), log (err %v):\n%s", p.Name, p.Spec.NodeName, p.Status.Phase, err, b)
	}
}
