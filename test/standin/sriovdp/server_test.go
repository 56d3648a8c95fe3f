package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/sriov-lane/sriov-lane/test/bound"
)

// requireRoot skips (or, under SRIOV_LANE_TEST_STRICT=1 as in `make test`,
// fails) unless root: test/testutil.RequireRoot's rule, without the Docker
// client that package brings into this module.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("SRIOV_LANE_TEST_STRICT") == "1" {
		t.Fatalf("prerequisite missing under SRIOV_LANE_TEST_STRICT=1: needs root (%s)", why)
	}
	t.Skipf("needs root (%s)", why)
}

// kubelet is the part of kubelet a device plugin talks to: the plugin
// watcher (GetInfo on sockets in plugins_registry) or, the deprecated way,
// the Registration service on kubelet.sock.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	reqs chan *pluginapi.RegisterRequest
}

func (k *kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- r
	return &pluginapi.Empty{}, nil
}

type fixture struct {
	o      options
	cancel context.CancelFunc
	done   chan error
	ready  chan []*resourceServer
}

func testOptions(t *testing.T, root string) options {
	// Short: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := defaultOptions()
	o.sysfsRoot = root
	o.resourcePrefix = "kubevirt.io"
	o.configFile = filepath.Join(dir, "config.json")
	o.pluginDir = filepath.Join(dir, "device-plugins")
	o.registryDir = filepath.Join(dir, "plugins_registry")
	o.devInfoDir = filepath.Join(dir, "devinfo", "dp")
	o.vfioDevDir = filepath.Join(o.pluginDir, "sriov-lane-standin", "vfio")
	o.logRoot = filepath.Join(dir, "log")
	o.net = fakeNet{}
	// The product's pod has both as hostPath volumes (pkg/cni/sriov.go).
	for _, d := range []string{o.pluginDir, o.devInfoDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func start(t *testing.T, o options, cfg string) *fixture {
	t.Helper()
	if err := os.WriteFile(o.configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(60*time.Second))
	f := &fixture{o: o, cancel: cancel, done: make(chan error, 1), ready: make(chan []*resourceServer, 1)}
	go func() { f.done <- run(ctx, o, func(s []*resourceServer) { f.ready <- s }) }()
	t.Cleanup(func() {
		cancel()
		// nil once cancelled; an error is a failure the plugin met first.
		if err := <-f.done; err != nil {
			t.Logf("plugin exited: %v", err)
		}
	})
	return f
}

func (f *fixture) servers(t *testing.T) []*resourceServer {
	t.Helper()
	select {
	case s := <-f.ready:
		return s
	case err := <-f.done:
		f.done <- err // for Cleanup
		t.Fatalf("plugin exited: %v", err)
	case <-time.After(bound.Scaled(30 * time.Second)):
		t.Fatal("plugin did not start")
	}
	return nil
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func specsOf(c *pluginapi.ContainerAllocateResponse) []string {
	var out []string
	for _, d := range c.Devices {
		out = append(out, d.HostPath+" "+d.ContainerPath+" "+d.Permissions)
	}
	return out
}
