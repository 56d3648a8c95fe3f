package apiserver

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// StartForTest starts a control plane from $SRIOV_LANE_TEST_ASSETS, stops it
// when the test ends, and prints its logs if the test failed.
func StartForTest(t testing.TB) *rest.Config {
	t.Helper()
	assets := testutil.RequireEnvPath(t, "SRIOV_LANE_TEST_ASSETS", "kube-apiserver and etcd binaries")
	s, err := Start(context.Background(), Options{AssetsDir: assets})
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
