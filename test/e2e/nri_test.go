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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/test/rig"
)

// network-resources-injector on the rig, as far as its nodes can show it:
// the stand-in k3s runs no pods, so the injector never starts (and
// wait.daemonSets is off there). What is checked: up deploys the component
// with a certificate it made, the webhook trusts exactly that CA, the key
// is nowhere but the Secret, and pods are still admitted while the
// injector is down (failurePolicy Ignore).
func TestNetworkResourcesInjectorOnTheRig(t *testing.T) {
	requireRig(t)
	r := rig.NewForTest(t, 2, "rgn")
	l := newLane(t, r, "e2e-n", 16465)
	kc := filepath.Join(r.Dir, "kubeconfig-n")
	res := run(t, []string{"SRIOV_LANE_NETWORK_RESOURCES_INJECTOR=true"}, "up", "--config", l.path, "--kubeconfig", kc)
	if res.code != 0 {
		t.Fatal("up failed")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	s, err := cs.CoreV1().Secrets(cni.NRINamespace).Get(ctx, cni.NRISecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cni.NRIWebhookConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(cni.NRINamespace).Get(ctx, cni.NRIName, metav1.GetOptions{}); err != nil {
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
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: cni.NRIService + "." + cni.NRINamespace + ".svc", Roots: roots}); err != nil {
		t.Errorf("serving certificate against caBundle: %v", err)
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("key does not match: %v", err)
	}

	// The key is in no output and no file the lane wrote.
	key := strings.TrimSpace(string(s.Data[corev1.TLSPrivateKeyKey]))
	keyLine := strings.Split(key, "\n")[1]
	if strings.Contains(res.output, "PRIVATE KEY") || strings.Contains(res.output, keyLine) {
		t.Error("up printed the webhook key")
	}
	_ = filepath.WalkDir(l.cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(keyLine)) {
			t.Errorf("%s holds the webhook key", p)
		}
		return nil
	})

	// Nothing runs the injector here: a pod outside kube-system is still
	// admitted, unchanged.
	// (The stand-in server runs no controller-manager to make the SA.)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nri-down", Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "sriov-net"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("pod refused while the injector is down: %v", err)
	} else if len(pod.Spec.Containers[0].Resources.Requests) != 0 {
		t.Errorf("pod mutated: %v", pod.Spec.Containers[0].Resources)
	}

	if res := l.down(t); res.code != 0 {
		t.Fatal("down failed")
	}
	assertLaneGone(t, r, l, r.State.PFs)
}
