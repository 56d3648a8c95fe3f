package apiserver

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// TestOptions are the Options of a test's control plane: the binaries from
// $SRIOV_LANE_TEST_ASSETS, and ports of a test slot of its own.
func TestOptions(t testing.TB) Options {
	t.Helper()
	assets := testutil.RequireEnvPath(t, "SRIOV_LANE_TEST_ASSETS", "kube-apiserver and etcd binaries")
	s := testutil.TakeSlot(t)
	return Options{AssetsDir: assets, SecurePort: s.Port(t), EtcdClientPort: s.Port(t), EtcdPeerPort: s.Port(t),
		ReadyTimeout: testutil.APIServerReadyBound}
}

// StartForTest starts a control plane with TestOptions and extraArgs
// (Options.ExtraArgs), stops it when the test ends, and prints its logs if
// the test failed.
func StartForTest(t testing.TB, extraArgs ...string) *rest.Config {
	t.Helper()
	opts := TestOptions(t)
	opts.ExtraArgs = extraArgs
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", s.Logs())
		}
		s.Stop()
	})
	return s.Config
}

// ClientsForTest starts a control plane as StartForTest does and makes the
// test's clients of it with newClients (kubernetes.NewForConfig,
// kube.ForConfig, ...), failing the test if they cannot be made.
func ClientsForTest[C any](t testing.TB, newClients func(*rest.Config) (C, error)) (*rest.Config, C) {
	t.Helper()
	cfg := StartForTest(t)
	c, err := newClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}
