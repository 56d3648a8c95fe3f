package provider

import (
	"fmt"
	"strconv"
	"strings"

	k3dconf "github.com/k3d-io/k3d/v5/pkg/config/types"
	"github.com/k3d-io/k3d/v5/pkg/config/v1alpha5"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// HostFacts is what ClusterConfig needs to know about the host. The caller
// stats the paths, so the translation itself stays pure and testable.
type HostFacts struct {
	// VFIODir is true when the lane's VFIODir exists on the host.
	VFIODir bool
	// LibModules is true when /lib/modules exists on the host.
	LibModules bool
	// Cgroup is the host's cgroup mode (CgroupUnknown when undetectable:
	// kubelet then keeps its own default, and check says why).
	Cgroup CgroupMode
}

// kubeletAllowCgroupV1 lets kubelet start on a cgroup v1 host. Kubelet
// refuses v1 by default since 1.35: failCgroupV1 defaults to true in the
// release the default k3s image ships (kubernetes/kubernetes
// pkg/kubelet/apis/config/v1beta1/defaults.go@v1.35.5, and the field's doc,
// staging/src/k8s.io/kubelet/config/v1beta1/types.go@v1.35.5: "Default:
// true"); --fail-cgroupv1 is the flag form, kept undeprecated
// (cmd/kubelet/app/options/options.go@v1.35.5).
const kubeletAllowCgroupV1 = "fail-cgroupv1=false"

// Notes are the host facts that change the cluster, in words, for up to
// print: a user on such a host should know the lane differs from the default.
func (h HostFacts) Notes() []string {
	var out []string
	if h.Cgroup.V1() {
		out = append(out, "host uses "+h.Cgroup.Describe()+": passing kubelet "+kubeletAllowCgroupV1+" to every node")
	}
	return out
}

const (
	libModules = "/lib/modules"
	devVFIO    = "/dev/vfio"
)

// CIDRs are the pod and service CIDRs k3s gets for a lane (the lane's
// config.Networks), in k3s's comma-separated form, IPv4 first. Service is ""
// for ipv4, where k3s's default stands.
func CIDRs(l *config.Lane) (cluster, service string) {
	n := l.Networks()
	if l.IPFamily == config.IPFamilyIPv4 {
		return n.Pods(), ""
	}
	return n.Pods(), n.Services()
}

// ServerDatastoreDir is where k3s keeps its datastore: kine's SQLite
// (db/state.db) for a single server, embedded etcd (db/etcd) with
// --cluster-init, both under the server's data dir
// /var/lib/rancher/k3s/server. The rig's stand-in keeps its etcd at the
// same place.
const ServerDatastoreDir = "/var/lib/rancher/k3s/server/db"

// DatastoreVolumeName is the tmpfs-backed Docker volume holding the
// server's datastore. Its k3d- prefix and the k3d.cluster label make it one
// of the cluster's volumes, removed with it by k3d and by Delete
// (k3d-io/k3d pkg/runtimes/util/volumes.go and pkg/client/cluster.go@v5.9.0).
func DatastoreVolumeName(cluster string) string { return "k3d-" + cluster + "-datastore" }

// ClusterConfig translates a lane into k3d's simple config: one server and
// l.Agents agents, no load balancer, the API on 127.0.0.1:l.APIPort, k3s's
// own flannel and network policy off (the lane deploys its CNI), the
// packaged components K3sDisabled names off,
// agents set up for the CPU manager, VFIO and kernel modules, a distinct
// /etc/machine-id per node, every kubelet allowed to run on a cgroup v1 host
// and the registries config. l is a lane config.Validate accepted; only
// what depends on the host is checked here.
func ClusterConfig(l *config.Lane, host HostFacts) (*v1alpha5.SimpleConfig, error) {
	cidr, serviceCIDR := CIDRs(l)
	if l.VFDriver == config.VFDriverVFIO && !host.VFIODir {
		return nil, fmt.Errorf("vfDriver is %s but vfioDir %s does not exist on this host: load the vfio-pci module (modprobe vfio-pci), point vfioDir at the host's VFIO directory, or use vfDriver %s",
			config.VFDriverVFIO, l.VFIODir, config.VFDriverNetdevice)
	}
	name := l.ClusterName()
	sc := &v1alpha5.SimpleConfig{
		TypeMeta:   k3dconf.TypeMeta{APIVersion: v1alpha5.ApiVersion, Kind: "Simple"},
		ObjectMeta: k3dconf.ObjectMeta{Name: name},
		Servers:    1,
		Agents:     l.Agents,
		Image:      l.K3sImage,
		ExposeAPI: v1alpha5.SimpleExposureOpts{
			Host:     "127.0.0.1",
			HostIP:   "127.0.0.1",
			HostPort: strconv.Itoa(l.APIPort),
		},
	}
	sc.Options.K3dOptions = v1alpha5.SimpleConfigOptionsK3d{
		Wait:                true,
		Timeout:             l.WaitTimeout.Duration,
		DisableLoadbalancer: true,
		// k3d's image volume is kept: image import and the tools node use it.
		DisableImageVolume: false,
	}
	// The lane writes its own kubeconfig file; k3d must not edit ~/.kube/config.
	sc.Options.KubeconfigOptions = v1alpha5.SimpleConfigOptionsKubeconfig{}

	server := []string{"server:0"}
	agents := []string{"agent:*"}
	serverArgs := append(k3sDisableArgs(),
		"--flannel-backend=none",
		"--disable-network-policy",
		"--cluster-cidr="+cidr,
	)
	if serviceCIDR != "" {
		serverArgs = append(serverArgs, "--service-cidr="+serviceCIDR)
	}
	for _, a := range serverArgs {
		sc.Options.K3sOptions.ExtraArgs = append(sc.Options.K3sOptions.ExtraArgs, v1alpha5.K3sArgWithNodeFilters{Arg: a, NodeFilters: server})
	}
	for _, a := range kubeletArgs(l.Kubelet) {
		sc.Options.K3sOptions.ExtraArgs = append(sc.Options.K3sOptions.ExtraArgs, v1alpha5.K3sArgWithNodeFilters{Arg: "--kubelet-arg=" + a, NodeFilters: agents})
	}
	if host.Cgroup.V1() {
		// The server runs a kubelet too (k3s server is also a node): without
		// this it would refuse to start and the cluster never comes up.
		sc.Options.K3sOptions.ExtraArgs = append(sc.Options.K3sOptions.ExtraArgs, v1alpha5.K3sArgWithNodeFilters{
			Arg: "--kubelet-arg=" + kubeletAllowCgroupV1, NodeFilters: []string{"server:*", "agent:*"},
		})
	}
	// No --node-label here: k3s hands each one to kubelet's --node-labels
	// unchanged and kubelet refuses to start with a kubernetes.io label
	// outside its own set (node-role.kubernetes.io/worker among them), so up
	// labels the agents' Nodes through the API instead (pkg/lane).

	vol := func(spec string, filters ...string) {
		sc.Volumes = append(sc.Volumes, v1alpha5.VolumeWithNodeFilters{Volume: spec, NodeFilters: filters})
	}
	if l.DatastoreOnTmpfs() {
		// k3d's nodes have no tmpfs setting of their own (only /run and
		// /var/run, k3d-io/k3d pkg/types/defaults.go@v5.9.0): the volume
		// is a Docker local volume of type tmpfs that Create makes first.
		vol(DatastoreVolumeName(name)+":"+ServerDatastoreDir, server...)
	}
	if host.VFIODir {
		vol(l.VFIODir+":"+devVFIO, agents...)
	}
	if host.LibModules {
		vol(libModules+":"+libModules+":ro", agents...)
	}
	if l.IPFamily != config.IPFamilyIPv4 {
		vol(ipv6HookFile(l)+":"+ipv6HookInNode+":ro", "server:*", "agent:*")
	}
	// Every node needs its own machine-id: kubelet and CNIs derive node
	// identity from it, and containers otherwise share the image's.
	for i, n := range nodeNames(l) {
		filter := "server:0"
		if i > 0 {
			filter = fmt.Sprintf("agent:%d", i-1)
		}
		vol(l.Dir().MachineID(n)+":/etc/machine-id:ro", filter)
	}
	for i, s := range l.Volumes {
		v, err := config.ParseVolume(s)
		if err != nil {
			return nil, fmt.Errorf("volumes[%d]: %w", i, err)
		}
		spec := v.Host + ":" + v.Container
		if v.ReadOnly {
			spec += ":ro"
		}
		vol(spec, v.NodeFilters...)
	}

	reg, err := RegistriesConfig(l)
	if err != nil {
		return nil, err
	}
	sc.Registries.Config = reg
	return sc, nil
}

// kubeletArgs are the agents' kubelet flags (kubevirtci's CPU-manager and
// topology-manager set-up). Policy flags are left out for "none" and the
// scope for "container", kubelet's defaults (kubernetes/kubernetes
// pkg/kubelet/apis/config/v1beta1/defaults.go@v1.35.5); the reservations
// stand on their own. --topology-manager-policy and --topology-manager-scope
// are kubelet flags (cmd/kubelet/app/options/options.go@v1.35.5).
func kubeletArgs(k config.Kubelet) []string {
	var out []string
	if k.CPUManagerPolicy != "" && k.CPUManagerPolicy != "none" {
		out = append(out, "cpu-manager-policy="+k.CPUManagerPolicy)
	}
	if k.TopologyManagerPolicy != "" && k.TopologyManagerPolicy != config.TopologyPolicyNone {
		out = append(out, "topology-manager-policy="+k.TopologyManagerPolicy)
	}
	if k.TopologyManagerScope != "" && k.TopologyManagerScope != config.TopologyScopeContainer {
		out = append(out, "topology-manager-scope="+k.TopologyManagerScope)
	}
	if k.KubeReserved != "" {
		out = append(out, "kube-reserved="+k.KubeReserved)
	}
	if k.SystemReserved != "" {
		out = append(out, "system-reserved="+k.SystemReserved)
	}
	return out
}

// RegistriesConfig renders k3s's registries.yaml for the lane: the lane
// registry as plain-HTTP registry:5000, and the image mirror (if any) as the
// endpoint for every registry ("*", containerd's catch-all in k3s). It returns
// "" when there is nothing to configure.
func RegistriesConfig(l *config.Lane) (string, error) {
	r := registriesYAML{Mirrors: map[string]mirrorYAML{}}
	if l.RegistryEnabled() {
		host := RegistryAlias + ":" + registryInternalPort
		r.Mirrors[host] = mirrorYAML{Endpoints: []string{"http://" + host}}
	}
	if m := strings.TrimSpace(l.ImageRegistryMirror); m != "" {
		if !strings.Contains(m, "://") {
			m = "https://" + m
		}
		r.Mirrors["*"] = mirrorYAML{Endpoints: []string{m}}
	}
	if len(r.Mirrors) == 0 {
		return "", nil
	}
	b, err := yaml.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("rendering registries config: %w", err)
	}
	// k3d reads a one-line value as a file path: the embedded form must be
	// multi-line, which a mirrors map always is.
	return string(b), nil
}

// registriesYAML is the part of k3s's registries.yaml the lane sets (k3d
// parses it into wharfie's type; that type would render empty keys).
type registriesYAML struct {
	Mirrors map[string]mirrorYAML `json:"mirrors"`
}

type mirrorYAML struct {
	Endpoints []string `json:"endpoint"`
}
