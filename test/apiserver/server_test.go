package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/test/bound"
)

func TestStartCreateNamespaceStop(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	opts := TestOptions(t)
	opts.SANs = []string{"sriov-lane.test"}
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(2*time.Minute))
	defer cancel()

	begin := time.Now()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	t.Logf("control plane ready in %s", time.Since(begin).Round(time.Millisecond))

	// Go through the kubeconfig, the path k3d and the product use.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Kubeconfig)
	if err != nil {
		t.Fatalf("parsing kubeconfig: %v", err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sriov-lane-apiserver-test"}}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v\n%s", err, s.Logs())
	}
	got, err := kc.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	if err != nil || got.UID == "" {
		t.Fatalf("reading namespace back: %v (uid %q)", err, got.GetUID())
	}
	v, err := kc.Discovery().ServerVersion()
	if err != nil || v.Major != "1" || v.Minor != "36" {
		t.Fatalf("server version = %+v, %v; want 1.36 (ldflags lost?)", v, err)
	}

	dir := s.Dir
	s.Stop()
	stopped = true
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s behind (stat err %v)", dir, err)
	}
	if _, err := kc.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err == nil {
		t.Fatalf("API still answers after Stop")
	}
}

// A stand-in node container that restarts runs Start again on the same
// directory: data must survive and earlier credentials must stay valid.
func TestRestartOnSameDirKeepsDataAndCredentials(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(3*time.Minute))
	defer cancel()
	opts := TestOptions(t)
	opts.Dir, opts.Token = t.TempDir(), "restart-token"

	first, kc, ns := startWithNamespace(ctx, t, opts, "survives-restart")
	first.Stop()
	if _, err := os.Stat(opts.Dir); err != nil {
		t.Fatalf("Stop removed a caller-given directory: %v", err)
	}

	second, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("second Start on %s: %v", opts.Dir, err)
	}
	t.Cleanup(second.Stop)
	// The first run's client (its CA and token) must still be accepted.
	if _, err := kc.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace or credentials lost across restart: %v\n%s", err, second.Logs())
	}
}

// startWithNamespace starts a server on opts (stopped at the test's end)
// and creates namespace name in it, for a restart to keep or lose.
func startWithNamespace(ctx context.Context, t *testing.T, opts Options, name string) (*Server, kubernetes.Interface, *corev1.Namespace) {
	t.Helper()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}
	t.Cleanup(s.Stop)
	kc, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return s, kc, ns
}

// A restarted k3s server whose datastore was on a tmpfs starts on an empty
// datastore with the certificates it had: the earlier credentials are
// still accepted, the earlier objects are gone.
func TestRestartOnEmptyEtcdDirKeepsCredentials(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(3*time.Minute))
	defer cancel()
	opts := TestOptions(t)
	opts.Dir, opts.Token = t.TempDir(), "restart-token"
	opts.EtcdDir = filepath.Join(t.TempDir(), "db", "etcd")

	first, kc, ns := startWithNamespace(ctx, t, opts, "gone-with-the-datastore")
	if _, err := os.Stat(filepath.Join(opts.EtcdDir, "member")); err != nil {
		t.Fatalf("etcd's data is not in EtcdDir: %v", err)
	}
	first.Stop()
	if err := os.RemoveAll(opts.EtcdDir); err != nil {
		t.Fatal(err)
	}

	second, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("second Start on an empty %s: %v", opts.EtcdDir, err)
	}
	t.Cleanup(second.Stop)
	_, err = kc.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after the datastore went: %v, want NotFound from a server that still accepts the first run's CA and token\n%s", err, second.Logs())
	}
}
