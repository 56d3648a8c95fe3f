package provider

import (
	"context"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func allHost() HostFacts { return HostFacts{VFIODir: true, LibModules: true} }

// goldenClusterConfig compares the k3d config of l on host with a golden file.
func goldenClusterConfig(t *testing.T, l *config.Lane, host HostFacts, golden string) {
	t.Helper()
	sc, err := ClusterConfig(l, host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", golden), b, *update)
}

func TestClusterConfigGoldenDefault(t *testing.T) {
	goldenClusterConfig(t, config.Default(), allHost(), "default.golden")
}

func TestClusterConfigGoldenCalicoMirror(t *testing.T) {
	l := config.Default()
	l.Name = "ci"
	l.Agents = 1
	l.CNI = config.CNICalico
	l.VFDriver = config.VFDriverNetdevice
	l.Kubelet.CPUManagerPolicy = "none"
	l.ImageRegistryMirror = "mirror.example.com:5000"
	l.Registry.Enabled = new(bool)
	l.Volumes = []string{"/srv/data:/data:ro@agent:0;server:0"}
	// A cgroup v1 host: the golden shows the one kubelet arg that adds.
	goldenClusterConfig(t, l, HostFacts{Cgroup: CgroupV1}, "calico-mirror.golden")
}

func TestClusterConfigVFIOMissing(t *testing.T) {
	l := config.Default()
	l.VFIODir = "/nonexistent/vfio"
	_, err := ClusterConfig(l, HostFacts{LibModules: true})
	if err == nil {
		t.Fatal("vfio-pci lane without a VFIO dir was accepted")
	}
	for _, want := range []string{"vfio-pci", "/nonexistent/vfio", "netdevice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	l.VFDriver = config.VFDriverNetdevice
	sc, err := ClusterConfig(l, HostFacts{})
	if err != nil {
		t.Fatalf("netdevice lane without VFIO: %v", err)
	}
	for _, v := range sc.Volumes {
		if strings.Contains(v.Volume, devVFIO) || strings.Contains(v.Volume, libModules) {
			t.Errorf("volume %q mounted although the host lacks it", v.Volume)
		}
	}
}

// TestClusterConfigThroughK3d feeds the translation to k3d's own transform
// (no Docker involved with the load balancer off) and checks what each node
// container will get: that is what matters, not the simple config's shape.
func TestClusterConfigThroughK3d(t *testing.T) {
	l := config.Default()
	l.Name = "pvunit"
	l.Agents = 2
	l.Volumes = []string{"/srv/a:/a@agent:1"}
	l.ImageRegistryMirror = "http://mirror.local"
	sc, err := ClusterConfig(l, allHost())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := k3dconfig.TransformSimpleToClusterConfig(context.Background(), runtimes.Docker, *sc, "")
	if err != nil {
		t.Fatalf("k3d rejected the translation: %v", err)
	}
	if cc.ServerLoadBalancer != nil || !cc.ClusterCreateOpts.DisableLoadBalancer {
		t.Error("load balancer not disabled")
	}
	if got := cc.KubeAPI.Binding.HostIP + ":" + cc.KubeAPI.Binding.HostPort; got != "127.0.0.1:6443" {
		t.Errorf("API bound on %s", got)
	}
	if cc.ClusterCreateOpts.Timeout != l.WaitTimeout.Duration || !cc.ClusterCreateOpts.WaitForServer {
		t.Errorf("wait/timeout not carried: %v %v", cc.ClusterCreateOpts.WaitForServer, cc.ClusterCreateOpts.Timeout)
	}
	byName := map[string]*k3d.Node{}
	for _, n := range cc.Nodes {
		byName[n.Name] = n
	}
	if len(cc.Nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(cc.Nodes))
	}
	srv := byName["k3d-pvunit-server-0"]
	if srv == nil || srv.Role != k3d.ServerRole {
		t.Fatalf("server-0 missing: %v", byName)
	}
	for _, a := range []string{"--disable=traefik", "--disable=servicelb", "--disable=metrics-server", "--flannel-backend=none", "--disable-network-policy", "--cluster-cidr=10.42.0.0/16"} {
		if !slices.Contains(srv.Args, a) {
			t.Errorf("server args %v lack %s", srv.Args, a)
		}
	}
	// CoreDNS and local-storage stay: k3d skips its CoreDNS host entries
	// for any --disable flag naming coredns (pkg/client/cluster.go@v5.9.0),
	// and the lane's PVCs need the default StorageClass.
	for _, a := range srv.Args {
		if strings.HasPrefix(a, "--disable=") && (strings.Contains(a, "coredns") || strings.Contains(a, "local-storage")) {
			t.Errorf("server arg %s disables a component the lane keeps", a)
		}
	}
	if slices.ContainsFunc(srv.Args, func(s string) bool { return strings.HasPrefix(s, "--kubelet-arg") }) {
		t.Errorf("server got agent kubelet args: %v", srv.Args)
	}
	seenIDs := map[string]bool{}
	for i := 0; i < 2; i++ {
		a := byName[NodeName("pvunit", RoleAgent, i)]
		if a == nil {
			t.Fatalf("agent %d missing", i)
		}
		for _, want := range []string{"--kubelet-arg=cpu-manager-policy=static", "--kubelet-arg=kube-reserved=cpu=500m", "--kubelet-arg=system-reserved=cpu=500m"} {
			if !slices.Contains(a.Args, want) {
				t.Errorf("%s args %v lack %s", a.Name, a.Args, want)
			}
		}
		if slices.Contains(a.Args, "--disable=traefik") {
			t.Errorf("%s got server args", a.Name)
		}
		// The worker role is set through the API (pkg/lane): as a k3s
		// --node-label kubelet would refuse it and the agent never start.
		if len(a.K3sNodeLabels) > 0 || slices.ContainsFunc(a.Args, func(s string) bool { return strings.HasPrefix(s, "--node-label") }) {
			t.Errorf("%s gets k3s node labels %v, args %v", a.Name, a.K3sNodeLabels, a.Args)
		}
		for _, want := range []string{"/dev/vfio:/dev/vfio", "/lib/modules:/lib/modules:ro"} {
			if !slices.Contains(a.Volumes, want) {
				t.Errorf("%s volumes %v lack %s", a.Name, a.Volumes, want)
			}
		}
		if has := slices.Contains(a.Volumes, "/srv/a:/a"); has != (i == 1) {
			t.Errorf("%s extra volume present=%v, filter says agent:1", a.Name, has)
		}
	}
	for _, n := range cc.Nodes {
		var ids []string
		for _, v := range n.Volumes {
			if strings.HasSuffix(v, ":/etc/machine-id:ro") {
				ids = append(ids, v)
			}
		}
		if len(ids) != 1 || seenIDs[ids[0]] {
			t.Errorf("%s machine-id mounts %v (must be exactly one, not shared)", n.Name, ids)
		}
		if len(ids) == 1 {
			seenIDs[ids[0]] = true
			if !strings.Contains(ids[0], "/lanes/pvunit/machine-id/"+n.Name+":") {
				t.Errorf("%s machine-id source %s", n.Name, ids[0])
			}
		}
		if len(n.K3sNodeLabels) > 0 && n.Role == k3d.ServerRole {
			t.Errorf("server labelled %v", n.K3sNodeLabels)
		}
	}
	reg := cc.ClusterCreateOpts.Registries.Config
	if reg == nil {
		t.Fatal("registries config not parsed by k3d")
	}
	if ep := reg.Mirrors["registry:5000"].Endpoints; !slices.Equal(ep, []string{"http://registry:5000"}) {
		t.Errorf("registry:5000 endpoints %v", ep)
	}
	if ep := reg.Mirrors["*"].Endpoints; !slices.Equal(ep, []string{"http://mirror.local"}) {
		t.Errorf("mirror endpoints %v", ep)
	}
}

func TestRegistriesConfigEmpty(t *testing.T) {
	l := config.Default()
	l.Registry.Enabled = new(bool)
	s, err := RegistriesConfig(l)
	if err != nil || s != "" {
		t.Errorf("no registry, no mirror: got %q, %v", s, err)
	}
}

// On a cgroup v1 host every kubelet, the server's included, must get
// fail-cgroupv1=false, or k3s on Kubernetes >= 1.35 never starts: checked on
// what k3d hands each node container, where the node filters are resolved.
func TestClusterConfigCgroupV1ReachesEveryNode(t *testing.T) {
	l := config.Default()
	l.Name = "pvcg"
	l.Agents = 2
	for _, mode := range []CgroupMode{CgroupV1, CgroupHybrid, CgroupV2, CgroupUnknown} {
		host := allHost()
		host.Cgroup = mode
		sc, err := ClusterConfig(l, host)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := k3dconfig.TransformSimpleToClusterConfig(context.Background(), runtimes.Docker, *sc, "")
		if err != nil {
			t.Fatalf("%s: k3d rejected the translation: %v", mode, err)
		}
		if len(cc.Nodes) != 3 {
			t.Fatalf("%s: %d nodes, want 3", mode, len(cc.Nodes))
		}
		for _, n := range cc.Nodes {
			if got := slices.Contains(n.Args, "--kubelet-arg=fail-cgroupv1=false"); got != mode.V1() {
				t.Errorf("cgroup %q: %s (%s) has fail-cgroupv1=false: %v; args %v", mode, n.Name, n.Role, got, n.Args)
			}
			if n.Role == k3d.ServerRole && slices.Contains(n.Args, "--kubelet-arg=cpu-manager-policy=static") {
				t.Errorf("server got the agents' kubelet args: %v", n.Args)
			}
		}
	}
}

// Each k3s component is either disabled or kept, never both, and every
// name is one k3s's --disable knows (k3s-io/k3s
// pkg/cli/cmds/stage.go@v1.35.5+k3s1 DisableItems).
func TestK3sComponentsPartition(t *testing.T) {
	known := []string{"coredns", "servicelb", "traefik", "local-storage", "metrics-server", "runtimes"}
	seen := map[string]bool{}
	for _, n := range K3sDisabled {
		if !slices.Contains(known, n) || seen[n] {
			t.Errorf("disabled %q unknown to k3s or listed twice", n)
		}
		seen[n] = true
	}
	for _, c := range K3sKept {
		if !slices.Contains(known, c.Name) || seen[c.Name] {
			t.Errorf("kept %q unknown to k3s or also disabled", c.Name)
		}
		seen[c.Name] = true
		if c.Deployment == "" || len(c.Images) == 0 {
			t.Errorf("kept %q names no Deployment or images", c.Name)
		}
	}
	sc, err := ClusterConfig(config.Default(), allHost())
	if err != nil {
		t.Fatal(err)
	}
	var disables []string
	for _, a := range sc.Options.K3sOptions.ExtraArgs {
		if name, ok := strings.CutPrefix(a.Arg, "--disable="); ok {
			disables = append(disables, name)
		}
	}
	if !slices.Equal(disables, K3sDisabled) {
		t.Errorf("--disable args %v, want %v", disables, K3sDisabled)
	}
}

func TestK3sNodeImagesKnownOnlyForDefaultImage(t *testing.T) {
	l := config.Default()
	imgs, known := K3sNodeImages(l)
	if !known || imgs[0] != K3sPauseImage || !slices.Contains(imgs, K3sCoreDNSImage) || !slices.Contains(imgs, K3sLocalPathImage) || !slices.Contains(imgs, K3sLocalPathHelperImage) {
		t.Errorf("default lane: %v known=%v", imgs, known)
	}
	l.K3sImage = "rancher/k3s:v1.36.1-k3s1"
	if _, known := K3sNodeImages(l); known {
		t.Error("images claimed known for a k3s image they were not read at")
	}
	for _, img := range imgs {
		if !strings.HasPrefix(img, "docker.io/rancher/") || !strings.Contains(img, ":") {
			t.Errorf("%s: k3s's images are Docker Hub rancher/ images with a tag", img)
		}
	}
}

func TestHostImages(t *testing.T) {
	t.Setenv("K3D_IMAGE_TOOLS", "")
	l := config.Default()
	got := HostImages(l)
	if len(got) != 3 || got[0].Image != config.DefaultK3sImage || got[1].Image != "ghcr.io/k3d-io/k3d-tools:latest" || got[2].Image != config.DefaultRegistryImage {
		t.Errorf("host images %v", got)
	}
	off := false
	l.Registry.Enabled = &off
	l.ToolsImage = "mirror.example/k3d-tools:5.9.0"
	if got := HostImages(l); len(got) != 2 || got[1].Image != l.ToolsImage {
		t.Errorf("host images without registry, own tools image: %v", got)
	}
}
