package cni

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func injectorTestOptions() Options {
	o := defaultTestOptions()
	o.NetworkResourcesInjector.Enabled = true
	return o
}

func parseCert(t *testing.T, what string, b []byte) *x509.Certificate {
	t.Helper()
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s: not one PEM CERTIFICATE", what)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

// verifyWebhookCert checks what the API server checks when it calls the
// webhook: the serving certificate chains to caBundle for the Service's
// name, and the server's key matches it.
func verifyWebhookCert(t *testing.T, caBundle, certPEM, keyPEM []byte, at time.Time) {
	t.Helper()
	ca := parseCert(t, "CA", caBundle)
	cert := parseCert(t, "serving certificate", certPEM)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range InjectorServiceDNSNames() {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "kubernetes.default.svc", Roots: pool, CurrentTime: at}); err == nil {
		t.Error("serving certificate verifies for a name it was not made for")
	}
	// What the webhook's tls.LoadX509KeyPair does: the key matches.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("key does not match the certificate: %v", err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key is %T, want ECDSA", pair.PrivateKey)
	}
}

func TestNewWebhookCert(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	c, err := NewWebhookCert(InjectorServiceDNSNames(), now)
	if err != nil {
		t.Fatal(err)
	}
	verifyWebhookCert(t, c.CA, c.Cert, c.Key, now)
	ca := parseCert(t, "CA", c.CA)
	cert := parseCert(t, "serving certificate", c.Cert)
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || cert.IsCA {
		t.Errorf("CA IsCA %v usage %v; serving IsCA %v", ca.IsCA, ca.KeyUsage, cert.IsCA)
	}
	if cert.Subject.CommonName != "network-resources-injector-service.kube-system.svc" {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	for _, x := range []*x509.Certificate{ca, cert} {
		if !x.NotBefore.Equal(now.Add(-time.Hour)) || !x.NotAfter.Equal(now.Add(WebhookCertValidity)) {
			t.Errorf("%s valid %s to %s", x.Subject.CommonName, x.NotBefore, x.NotAfter)
		}
	}
	// Valid for its whole documented lifetime, not after.
	verifyWebhookCert(t, c.CA, c.Cert, c.Key, now.Add(WebhookCertValidity-time.Minute))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(ca), CurrentTime: now.Add(WebhookCertValidity + time.Minute)}); err == nil {
		t.Error("certificate verifies after its validity")
	}
	// Another lane gets another CA: its certificate does not verify here.
	other, err := NewWebhookCert(InjectorServiceDNSNames(), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(parseCert(t, "other CA", other.CA)), CurrentTime: now}); err == nil {
		t.Error("certificate verifies against another lane's CA")
	}
	if bytes.Equal(c.Key, other.Key) {
		t.Error("two certificates share a key")
	}
	// Never printed.
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", *c, *c, *c, c)} {
		if strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, string(c.Key[30:60])) {
			t.Errorf("key printed: %s", s)
		}
	}
	if _, err := NewWebhookCert(nil, now); err == nil {
		t.Error("no DNS names accepted")
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func injectorSecretAndCABundle(t *testing.T, objs []*unstructured.Unstructured) (corev1.Secret, []byte) {
	t.Helper()
	var s corev1.Secret
	find(t, objs, "Secret", InjectorSecret, &s)
	var m struct {
		Webhooks []struct {
			ClientConfig struct {
				CABundle []byte `json:"caBundle"`
			} `json:"clientConfig"`
		} `json:"webhooks"`
	}
	find(t, objs, "MutatingWebhookConfiguration", InjectorWebhookConfig, &m)
	if len(m.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(m.Webhooks))
	}
	return s, m.Webhooks[0].ClientConfig.CABundle
}

// plan (no certificate): placeholders, the same every time; up
// (WithWebhookCerts): a real certificate in the Secret and the caBundle.
func TestInjectorPlanAndUpCertificates(t *testing.T) {
	off, err := Objects(t.Context(), defaultTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range off {
		if strings.HasPrefix(u.GetName(), InjectorName) {
			t.Errorf("injector object %s %s in a default plan", u.GetKind(), u.GetName())
		}
	}
	if o, err := WithWebhookCerts(defaultTestOptions()); err != nil || o.NetworkResourcesInjector.Cert != nil {
		t.Errorf("a certificate made for a lane without the injector (err %v)", err)
	}

	render := func(o Options) ([]*unstructured.Unstructured, string) {
		t.Helper()
		objs, err := Objects(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Render(&b, objs, "yaml"); err != nil {
			t.Fatal(err)
		}
		return objs, b.String()
	}
	planObjs, plan := render(injectorTestOptions())
	if _, again := render(injectorTestOptions()); again != plan {
		t.Fatal("two plans with the injector differ")
	}
	if len(planObjs) != len(off)+9 {
		t.Errorf("the injector adds %d objects, want 9", len(planObjs)-len(off))
	}
	if last := planObjs[len(planObjs)-1]; last.GetKind() != "MutatingWebhookConfiguration" {
		t.Errorf("last object applied is %s %s: the webhook configuration goes after the Deployment", last.GetKind(), last.GetName())
	}
	s, caBundle := injectorSecretAndCABundle(t, planObjs)
	for k, v := range s.Data {
		if string(v) != webhookCertPlaceholder {
			t.Errorf("plan's Secret %s is not the placeholder", k)
		}
	}
	if string(caBundle) != webhookCertPlaceholder {
		t.Errorf("plan's caBundle %q is not the placeholder", caBundle)
	}
	if strings.Contains(plan, "PRIVATE KEY") {
		t.Error("plan shows a private key")
	}

	o, err := WithWebhookCerts(injectorTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	cert := o.NetworkResourcesInjector.Cert
	if cert == nil {
		t.Fatal("no certificate made")
	}
	if again, _ := WithWebhookCerts(o); again.NetworkResourcesInjector.Cert != cert {
		t.Error("WithWebhookCerts replaced a certificate it was given")
	}
	upObjs, _ := render(o)
	s, caBundle = injectorSecretAndCABundle(t, upObjs)
	if !bytes.Equal(s.Data["ca.crt"], cert.CA) || !bytes.Equal(caBundle, cert.CA) ||
		!bytes.Equal(s.Data[corev1.TLSCertKey], cert.Cert) || !bytes.Equal(s.Data[corev1.TLSPrivateKeyKey], cert.Key) {
		t.Error("the Secret and caBundle do not carry the certificate made")
	}
	verifyWebhookCert(t, caBundle, s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], time.Now())

	// A registry mirror reaches the injector's image too.
	o.ImageRegistryMirror = "mirror.example:5000"
	mirrored, _ := render(o)
	var dep appsv1.Deployment
	find(t, mirrored, "Deployment", InjectorName, &dep)
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "mirror.example:5000/k8snetworkplumbingwg/network-resources-injector:"+InjectorVersion {
		t.Errorf("mirrored image %s", img)
	}
}

// On a real API server: every object applies, the webhook configuration
// trusts exactly the CA in the Secret, and the Secret's certificate is
// valid for the Service the webhook calls. With the injector not running
// (nothing runs pods here), pod creation outside kube-system still
// succeeds: failurePolicy Ignore.
func TestInjectorApplyOnAPIServer(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, cs := startAPI(t)
	ensureDefaultServiceAccount(t, cs, "default")
	objs := applyInjector(t, cfg)
	before := resourceVersions(t, cfg, objs)

	s, err := cs.CoreV1().Secrets(InjectorNamespace).Get(t.Context(), InjectorSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), InjectorWebhookConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(mwc.Webhooks))
	}
	wh := mwc.Webhooks[0]
	if !bytes.Equal(wh.ClientConfig.CABundle, s.Data["ca.crt"]) {
		t.Error("the webhook's caBundle is not the Secret's CA")
	}
	verifyWebhookCert(t, wh.ClientConfig.CABundle, s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], time.Now())
	svc := wh.ClientConfig.Service
	if _, err := cs.CoreV1().Services(svc.Namespace).Get(t.Context(), svc.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the webhook calls Service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	dep, err := cs.AppsV1().Deployments(InjectorNamespace).Get(t.Context(), InjectorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := dep.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != s.Name {
		t.Errorf("the Deployment mounts %+v, not Secret %s", v.VolumeSource, s.Name)
	}

	// The same objects again change nothing.
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	after := resourceVersions(t, cfg, objs)
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("%s: resourceVersion %s -> %s on a second apply", k, rv, after[k])
		}
	}

	// No injector is running. kube-apiserver sees webhook configurations
	// through an informer, a moment after each write, so each phase first
	// probes with dry-run creates (the webhook has no side effects, so it
	// is called for those too) until the API server acts on what was
	// written. With upstream's failurePolicy Fail a pod is refused, naming
	// the webhook: the API server does consult it.
	podWith := func(ns, name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
	}
	// Each probe runs on the test's context, not the poll's: one cut short
	// by the poll's timeout (or by the rate limiter's wait against it)
	// would be an error no API server gave.
	waitFor := func(what string, ok func(error) bool) error {
		t.Helper()
		var last error // the last dry-run create's result
		if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bound.Scaled(15*time.Second), true, func(context.Context) (bool, error) {
			_, last = cs.CoreV1().Pods("default").Create(t.Context(), podWith("default", "probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return ok(last), nil
		}); err != nil {
			t.Fatalf("%s within 15 s: last dry-run create gave %v", what, last)
		}
		return last
	}
	mwc.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(t.Context(), mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = waitFor("a pod refused with failurePolicy Fail and no injector", func(err error) bool { return err != nil })
	if !strings.Contains(err.Error(), injectorWebhookName) {
		t.Errorf("with failurePolicy Fail and no injector, pod creation gave %v; want a refusal naming %s", err, injectorWebhookName)
	} else {
		t.Logf("with Fail: %v", err)
	}
	// kube-system is never sent to the webhook, Fail or not.
	ensureDefaultServiceAccount(t, cs, InjectorNamespace)
	if _, err := cs.CoreV1().Pods(InjectorNamespace).Create(t.Context(), podWith(InjectorNamespace, "injector-kube-system", nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("pod in kube-system refused: %v", err)
	}

	// The lane's own objects again (failurePolicy Ignore): the API server
	// cannot reach the webhook and admits the pod unchanged.
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	if err := waitFor("failurePolicy Ignore back in force", func(err error) bool { return err == nil }); err != nil {
		t.Fatalf("failurePolicy Ignore back in force, yet the dry-run create gave %v", err)
	}
	start := time.Now()
	pod, err := cs.CoreV1().Pods("default").Create(t.Context(), podWith("default", "injector-down", map[string]string{"k8s.v1.cni.cncf.io/networks": "sriov-net"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod refused while the injector is down (failurePolicy must be Ignore): %v", err)
	}
	t.Logf("pod admitted in %s with the injector unreachable", time.Since(start).Round(time.Millisecond))
	if len(pod.Spec.Containers[0].Resources.Requests) != 0 {
		t.Errorf("pod mutated without an injector: %v", pod.Spec.Containers[0].Resources)
	}
	// up's wait for the injector tells such an API server from one that
	// reaches the injector: it gives up, saying what it saw. Its own
	// clients, as up's are: the dry-run polls above have spent this
	// clientset's rate limiter, whose wait then outlasted the deadline
	// before a probe was sent ("would exceed context deadline", seen in
	// make test). The wait ends when the wait has seen one probe's answer,
	// that is when it sends a second probe, not at its bound: ten seconds,
	// for one webhook call on a loaded host.
	wctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(10*time.Second))
	defer cancel()
	probing := rest.CopyConfig(cfg)
	var probes atomic.Int32
	probing.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return testutil.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods") && probes.Add(1) == 2 {
				cancel()
			}
			return rt.RoundTrip(r)
		})
	})
	fresh, err := kubernetes.NewForConfig(probing)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitInjectorServing(wctx, fresh, objs); err == nil || !strings.Contains(err.Error(), "admitted unchanged") || !strings.Contains(err.Error(), InjectorService) {
		t.Errorf("WaitInjectorServing with no injector: %v", err)
	}
}

// WaitInjectorServing returns once a dry-run pod naming a missing network
// is refused by the injector's webhook, and not while pods are admitted
// unchanged (the webhook unreached, failurePolicy Ignore) or refused for
// another reason; without the injector among the objects it does not ask.
func TestWaitInjectorServing(t *testing.T) {
	t.Parallel() // its own clients; it waits out bounds
	objs, err := Objects(t.Context(), injectorTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	denial := apierrors.NewBadRequest(fmt.Sprintf(`admission webhook %q denied the request: could not find network attachment definition 'default/%s'`, injectorWebhookName, injectorProbeNetwork))
	// replies[i] is the answer to the i-th create; past the end, the last.
	answering := func(replies ...error) (*fake.Clientset, *[]k8stesting.CreateActionImpl) {
		cs := fake.NewClientset()
		var calls []k8stesting.CreateActionImpl
		cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			calls = append(calls, a.(k8stesting.CreateActionImpl))
			return true, nil, replies[min(len(calls), len(replies))-1]
		})
		return cs, &calls
	}

	t.Run("reached after two admissions and a missing service account", func(t *testing.T) {
		cs, calls := answering(nil, nil, apierrors.NewForbidden(corev1.Resource("pods"), injectorProbeNetwork, errors.New(`error looking up service account default/default`)), denial)
		if err := WaitInjectorServing(t.Context(), cs, objs); err != nil {
			t.Fatal(err)
		}
		if len(*calls) != 4 {
			t.Errorf("%d probes, want 4", len(*calls))
		}
		a := (*calls)[0]
		pod := a.GetObject().(*corev1.Pod)
		if !slices.Equal(a.GetCreateOptions().DryRun, []string{metav1.DryRunAll}) || a.GetNamespace() != metav1.NamespaceDefault ||
			pod.Annotations["k8s.v1.cni.cncf.io/networks"] != injectorProbeNetwork {
			t.Errorf("probe: namespace %q, dry run %v, annotations %v", a.GetNamespace(), a.GetCreateOptions().DryRun, pod.Annotations)
		}
	})
	t.Run("never reached", func(t *testing.T) {
		cs, _ := answering(nil)
		ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(50*time.Millisecond))
		defer cancel()
		if err := WaitInjectorServing(ctx, cs, objs); err == nil || !strings.Contains(err.Error(), "does not reach network-resources-injector") {
			t.Errorf("%v", err)
		}
	})
	// The two below end the wait from inside a probe, not by a short
	// deadline: under make test's load a 50 ms deadline came before the
	// first probe had answered, and the error then had nothing to report.
	t.Run("a probe the deadline cuts short", func(t *testing.T) {
		// The first probe is admitted unchanged; the deadline comes while
		// the second is in flight. The error says what the first saw.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cs := fake.NewClientset()
		n := 0
		cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			if n++; n == 1 {
				return true, nil, nil
			}
			cancel()
			return true, nil, ctx.Err()
		})
		if err := WaitInjectorServing(ctx, cs, objs); err == nil || !strings.Contains(err.Error(), "admitted unchanged") {
			t.Errorf("%v", err)
		}
	})
	t.Run("another webhook's refusal", func(t *testing.T) {
		cs, calls := answering(apierrors.NewBadRequest(`admission webhook "other.example.com" denied the request: no`))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// After the third refusal the wait ends, as its deadline would.
		cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			if len(*calls) == 3 {
				cancel()
			}
			return false, nil, nil
		})
		if err := WaitInjectorServing(ctx, cs, objs); err == nil || !strings.Contains(err.Error(), "other.example.com") {
			t.Errorf("%v", err)
		}
	})
	t.Run("no injector", func(t *testing.T) {
		cs, calls := answering(nil)
		plain, err := Objects(t.Context(), defaultTestOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := WaitInjectorServing(t.Context(), cs, plain); err != nil || len(*calls) != 0 {
			t.Errorf("%d probes: %v", len(*calls), err)
		}
	})
}

func TestWaitDeployments(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cfg, cs := startAPI(t)
	objs := applyInjector(t, cfg)
	setStatus := func(updated, available int32) {
		t.Helper()
		d, err := cs.AppsV1().Deployments(InjectorNamespace).Get(t.Context(), InjectorName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: updated, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available,
		}
		if _, err := cs.AppsV1().Deployments(InjectorNamespace).UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Without a Deployment in objs there is nothing to wait for.
	if err := WaitDeployments(t.Context(), cs, nil); err != nil {
		t.Fatal(err)
	}
	setStatus(2, 1)
	assertFailsInTime(t, func(ctx context.Context) error { return WaitDeployments(ctx, cs, objs) },
		"deployment kube-system/network-resources-injector: replicas 2, updated 2, total 2, ready 1, available 1", "pods: none")
	done := runWait(t, func(ctx context.Context) error { return WaitDeployments(ctx, cs, objs) })
	expectPending(t, done)
	setStatus(2, 2)
	expectDone(t, done)
}

// applyInjector applies the objects of a lane with the injector, its
// webhook certificate made, to the API server at cfg, and returns them.
func applyInjector(t *testing.T, cfg *rest.Config) []*unstructured.Unstructured {
	t.Helper()
	o, err := WithWebhookCerts(injectorTestOptions())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(t.Context(), clients(t, cfg), objs, log.Noop); err != nil {
		t.Fatal(err)
	}
	return objs
}
