package kube

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// A kubeconfig-built config carries client-go's default rate limit: the
// lane's clients lift it, and leave the caller's config alone.
func TestForConfigLiftsTheRateLimit(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	c, err := ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.QPS != qps || c.Config.Burst != burst {
		t.Errorf("QPS %v, burst %d", c.Config.QPS, c.Config.Burst)
	}
	if _, ok := c.Config.WarningHandler.(rest.NoWarnings); !ok {
		t.Errorf("warning handler %T: the API server's deprecation warnings would reach the progress output", c.Config.WarningHandler)
	}
	if cfg.QPS != 0 || cfg.Burst != 0 {
		t.Errorf("ForConfig changed the caller's config: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
	if c.Typed == nil || c.Dynamic == nil || c.Metadata == nil || c.Discovery == nil || c.Mapper == nil {
		t.Errorf("%+v", c)
	}
}

func TestConnectNamesAMissingKubeconfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if _, err := Connect(p); err == nil {
		t.Fatal("connected without a kubeconfig")
	}
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n"
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(p)
	if err != nil || c.Config.Host != "https://127.0.0.1:6443" {
		t.Fatalf("%v %v", c, err)
	}
}
