package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
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

func TestEnvNameIsUpstreamsRule(t *testing.T) {
	for _, c := range []struct{ prefix, name, want string }{
		{"kubevirt.io", "sriov_net", "PCIDEVICE_KUBEVIRT_IO_SRIOV_NET"},
		{"intel.com", "intel_sriov_netdevice", "PCIDEVICE_INTEL_COM_INTEL_SRIOV_NETDEVICE"},
		// Only '.' becomes '_' (resources/pool_stub.go GetEnvs@v3.11.0).
		{"my-vendor.example.io", "sriov-net", "PCIDEVICE_MY-VENDOR_EXAMPLE_IO_SRIOV-NET"},
	} {
		if got := envName(c.prefix, c.name); got != c.want {
			t.Errorf("envName(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
}

func TestArgsAreTheImageEntrypoints(t *testing.T) {
	// The product's args (pkg/cni/sriov.go).
	o, err := parseArgs([]string{"--log-dir=sriovdp", "--log-level=10", "--resource-prefix=kubevirt.io", "--config-file=/etc/pcidp/config.json"})
	if err != nil || o.resourcePrefix != "kubevirt.io" || o.configFile != "/etc/pcidp/config.json" || o.logDir != "sriovdp" {
		t.Errorf("product's args: %+v, %v", o, err)
	}
	// An empty value keeps sriovdp's default; a value after a second '='
	// is dropped, as awk -F= '{print $2}' does.
	o, err = parseArgs([]string{"--resource-prefix=", "--config-file=/a=b"})
	if err != nil || o.resourcePrefix != "intel.com" || o.configFile != "/a" {
		t.Errorf("empty and double '=': %+v, %v", o, err)
	}
	if _, err := parseArgs([]string{"-h"}); !errors.Is(err, errHelp) {
		t.Errorf("-h: %v", err)
	}
	// "--log-level 10" is two parameters to the entrypoint; "10" is unknown.
	for _, bad := range [][]string{{"--no-such=1"}, {"--log-level", "10"}, {"--use-cdi"}, {"positional"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
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
	if err := os.MkdirAll(o.pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return o
}

func start(t *testing.T, o options, cfg string) *fixture {
	t.Helper()
	if err := os.WriteFile(o.configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	f := &fixture{o: o, cancel: cancel, done: make(chan error, 1), ready: make(chan []*resourceServer, 1)}
	go func() { f.done <- run(ctx, o, func(s []*resourceServer) { f.ready <- s }) }()
	t.Cleanup(func() {
		cancel()
		<-f.done
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
	case <-time.After(30 * time.Second):
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

func TestPluginWatcherRegistrationListAndAllocate(t *testing.T) {
	requireRoot(t, "Allocate makes character devices for vfio-pci VFs")
	root := fakeTree(t)
	o := testOptions(t, root)
	if err := os.MkdirAll(o.registryDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := start(t, o, `{"resourceList":[
	 {"resourceName":"sriov_vfio","selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd0"]}]},
	 {"resourceName":"sriov_net","resourcePrefix":"example.com","excludeTopology":true,"selectors":{"drivers":["iavf"],"pfNames":["rgd0"]},
	  "additionalInfo":{"*":{"a":"1","b":"2"},"`+vf(0, 3)+`":{"b":"3"}}},
	 {"resourceName":"empty","selectors":[{"pfNames":["nosuch"]}]}]}`)
	servers := f.servers(t)
	if len(servers) != 2 {
		t.Fatalf("%d servers, want 2 (the empty pool gets none)", len(servers))
	}
	ctx := context.Background()

	// Kubelet's plugin watcher finds <prefix>_<name>.sock and asks.
	entries, _ := os.ReadDir(o.registryDir)
	var socks []string
	for _, e := range entries {
		socks = append(socks, e.Name())
	}
	if want := []string{"example.com_sriov_net.sock", "kubevirt.io_sriov_vfio.sock"}; !reflect.DeepEqual(socks, want) {
		t.Fatalf("plugins_registry holds %v, want %v", socks, want)
	}
	if e, _ := os.ReadDir(o.pluginDir); len(e) != 0 {
		t.Errorf("device-plugins holds %v in plugin watcher mode", e)
	}
	vfioSock := filepath.Join(o.registryDir, "kubevirt.io_sriov_vfio.sock")
	conn := dial(t, vfioSock)
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DevicePlugin || info.Name != "kubevirt.io/sriov_vfio" || info.Endpoint != vfioSock ||
		!reflect.DeepEqual(info.SupportedVersions, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("GetInfo = %+v", info)
	}
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}

	dp := pluginapi.NewDevicePluginClient(conn)
	stream, err := dp.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 2 || list.Devices[0].ID != vf(0, 0) || list.Devices[1].ID != vf(0, 1) ||
		list.Devices[0].Health != pluginapi.Healthy || list.Devices[0].Topology == nil || list.Devices[0].Topology.Nodes[0].ID != 0 {
		t.Fatalf("ListAndWatch = %v, want VFs 0 and 1 of rgd0, healthy, on NUMA node 0", list.Devices)
	}

	group0, _ := filepath.EvalSymlinks(filepath.Join(root, "bus/pci/devices", vf(0, 0), "iommu_group"))
	group1, _ := filepath.EvalSymlinks(filepath.Join(root, "bus/pci/devices", vf(0, 1), "iommu_group"))
	g0, g1 := filepath.Base(group0), filepath.Base(group1)
	alloc := func(ids ...string) *pluginapi.ContainerAllocateResponse {
		t.Helper()
		resp, err := dp.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ContainerResponses[0]
	}
	c := alloc(vf(0, 0), vf(0, 1))
	const env = "PCIDEVICE_KUBEVIRT_IO_SRIOV_VFIO"
	if c.Envs[env] != vf(0, 0)+","+vf(0, 1) {
		t.Errorf("%s = %q (envs %v)", env, c.Envs[env], c.Envs)
	}
	// First allocation: the vfio provider has no container path yet.
	wantInfo := `{"` + vf(0, 0) + `":{"generic":{"deviceID":"` + vf(0, 0) + `"},"vfio":{"mount":"/dev/vfio/vfio"}},"` +
		vf(0, 1) + `":{"generic":{"deviceID":"` + vf(0, 1) + `"},"vfio":{"mount":"/dev/vfio/vfio"}}}`
	if c.Envs[env+"_INFO"] != wantInfo {
		t.Errorf("%s_INFO = %s\nwant %s", env, c.Envs[env+"_INFO"], wantInfo)
	}
	if len(c.Envs) != 2 {
		t.Errorf("envs %v, want only %s and %s_INFO", c.Envs, env, env)
	}
	ctl, dev0, dev1 := filepath.Join(o.vfioDevDir, "vfio"), filepath.Join(o.vfioDevDir, g0), filepath.Join(o.vfioDevDir, g1)
	wantSpecs := []string{ctl + " /dev/vfio/vfio rw", dev0 + " /dev/vfio/" + g0 + " rw", dev1 + " /dev/vfio/" + g1 + " rw"}
	if got := specsOf(c); !reflect.DeepEqual(got, wantSpecs) {
		t.Errorf("device specs %v\nwant %v", got, wantSpecs)
	}
	var null, st unix.Stat_t
	if err := unix.Stat("/dev/null", &null); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ctl, dev0, dev1} {
		if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != null.Rdev {
			t.Errorf("%s is not a character device like /dev/null (%v)", p, err)
		}
	}
	if len(c.Mounts) != 0 || len(c.Annotations) != 0 {
		t.Errorf("mounts %v, annotations %v", c.Mounts, c.Annotations)
	}
	// Second allocation of VF 0: now with dev-mount; a removed stand-in
	// device is made again.
	if err := os.Remove(dev0); err != nil {
		t.Fatal(err)
	}
	c = alloc(vf(0, 0))
	if want := `{"` + vf(0, 0) + `":{"generic":{"deviceID":"` + vf(0, 0) + `"},"vfio":{"dev-mount":"/dev/vfio/` + g0 + `","mount":"/dev/vfio/vfio"}}}`; c.Envs[env+"_INFO"] != want {
		t.Errorf("second %s_INFO = %s\nwant %s", env, c.Envs[env+"_INFO"], want)
	}
	if got := specsOf(c); !reflect.DeepEqual(got, wantSpecs[:2]) {
		t.Errorf("device specs %v, want %v", got, wantSpecs[:2])
	}

	// Device info: upstream's file name, JSON and mode.
	p := filepath.Join(o.devInfoDir, "kubevirt.io-sriov_vfio-"+vf(0, 0)+"-device.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("device info file: %v", err)
	}
	if want := `{"type":"pci","version":"1.1.0","pci":{"pci-address":"` + vf(0, 0) + `"}}`; string(raw) != want {
		t.Errorf("device info %s, want %s", raw, want)
	}
	if fi, _ := os.Stat(p); fi == nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("device info mode %v, want 0444", fi)
	}
	if _, err := dp.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vf(0, 2)}}}}); err == nil {
		t.Errorf("allocating %s (not in the pool) succeeded", vf(0, 2))
	}

	// The netdevice pool: no device specs, generic and extra info, no
	// topology (excludeTopology), its own prefix.
	net := pluginapi.NewDevicePluginClient(dial(t, filepath.Join(o.registryDir, "example.com_sriov_net.sock")))
	nstream, err := net.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	nlist, err := nstream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(nlist.Devices) != 2 || nlist.Devices[0].Topology != nil {
		t.Errorf("netdevice ListAndWatch = %v, want two devices without topology", nlist.Devices)
	}
	nresp, err := net.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vf(0, 3)}}}})
	if err != nil {
		t.Fatal(err)
	}
	nc := nresp.ContainerResponses[0]
	if len(nc.Devices) != 0 || nc.Envs["PCIDEVICE_EXAMPLE_COM_SRIOV_NET"] != vf(0, 3) {
		t.Errorf("netdevice allocation: specs %v, envs %v", specsOf(nc), nc.Envs)
	}
	var ninfo map[string]map[string]map[string]string
	if err := json.Unmarshal([]byte(nc.Envs["PCIDEVICE_EXAMPLE_COM_SRIOV_NET_INFO"]), &ninfo); err != nil {
		t.Fatal(err)
	}
	if want := map[string]map[string]map[string]string{vf(0, 3): {"generic": {"deviceID": vf(0, 3)}, "extra": {"a": "1", "b": "3"}}}; !reflect.DeepEqual(ninfo, want) {
		t.Errorf("netdevice _INFO %v, want %v", ninfo, want)
	}
	if _, err := os.Stat(filepath.Join(o.devInfoDir, "example.com-sriov_net-"+vf(0, 3)+"-device.json")); err != nil {
		t.Errorf("netdevice device info: %v", err)
	}

	// Stopping removes the sockets and the pools' device info files.
	f.cancel()
	if err := <-f.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	f.done <- nil // for Cleanup
	for _, p := range []string{vfioSock, filepath.Join(o.devInfoDir, "kubevirt.io-sriov_vfio-"+vf(0, 0)+"-device.json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

func TestDeprecatedRegistrationAndKubeletRestart(t *testing.T) {
	defer func(d time.Duration) { watchEvery = d }(watchEvery)
	watchEvery = 50 * time.Millisecond
	o := testOptions(t, fakeTree(t)) // no plugins_registry: the deprecated way
	k := &kubelet{reqs: make(chan *pluginapi.RegisterRequest, 4)}
	ln, err := net.Listen("unix", filepath.Join(o.pluginDir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ks := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(ks, k)
	go func() { _ = ks.Serve(ln) }()
	defer ks.Stop()

	f := start(t, o, `{"resourceList":[{"resourceName":"sriov_net","selectors":[{"drivers":["vfio-pci"]}]}]}`)
	f.servers(t)
	want := &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "kubevirt.io_sriov_net.sock", ResourceName: "kubevirt.io/sriov_net"}
	for i := range 2 {
		select {
		case r := <-k.reqs:
			if r.Version != want.Version || r.Endpoint != want.Endpoint || r.ResourceName != want.ResourceName || r.Options != nil {
				t.Errorf("registration %d: %+v, want %+v", i, r, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("registration %d did not come", i)
		}
		// A restarting kubelet removes every socket in device-plugins.
		if i == 0 {
			if err := os.Remove(filepath.Join(o.pluginDir, want.Endpoint)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(o.pluginDir, want.Endpoint)); err != nil {
		t.Errorf("socket not made again: %v", err)
	}
}

func TestNoPoolsExitsAsUpstream(t *testing.T) {
	o := testOptions(t, fakeTree(t))
	if err := os.WriteFile(o.configFile, []byte(`{"resourceList":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, o, nil); err != nil {
		t.Errorf("no resource configuration: %v, want a clean exit", err)
	}
	if err := os.WriteFile(o.configFile, []byte(`{"resourceList":[{"resourceName":"a/b","selectors":[{}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, o, nil); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Errorf("invalid config: %v", err)
	}
}
