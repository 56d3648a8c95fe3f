package config

import (
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// Pinned defaults. K3sImage must be pinned here: k3d used as a library
// defaults to rancher/k3s:v1.32.5-k3s1 (k3d-io/k3d version/version.go@v5.9.0;
// only k3d's release binaries substitute the stable channel at build time),
// and the pinned Calico (pkg/cni CalicoVersion) is tested on 1.34-1.36.
const (
	DefaultName           = "sriov"
	DefaultK3sImage       = "rancher/k3s:v1.35.5-k3s1"
	DefaultRegistryImage  = "registry:2.8.3"
	DefaultRegistryAddr   = "127.0.0.1:5000"
	DefaultStateDir       = "/var/lib/sriov-lane"
	DefaultSysfsRoot      = "/sys"
	DefaultVFIODir        = "/dev/vfio"
	DefaultResourcePrefix = "kubevirt.io"
	DefaultResourceName   = "sriov_net"
	DefaultNodeLabel      = "sriov_capable=true"
)

// DefaultWaitTimeout bounds each of up's waits (nodes ready, components
// rolled out): on a cold image cache the nodes pull k3s and every
// component's image first, which takes minutes; a lane not up after this
// is stuck, and the wait's error says on what.
const DefaultWaitTimeout = 10 * time.Minute

// Default returns a lane with every default set.
func Default() *Lane {
	l := &Lane{APIVersion: APIVersion, Kind: Kind}
	SetDefaults(l)
	return l
}

// SetDefaults fills every unset field of l. It is the only place defaults live.
func SetDefaults(l *Lane) {
	orString(&l.APIVersion, APIVersion)
	orString(&l.Kind, Kind)
	orString(&l.Name, DefaultName)
	orInt(&l.Agents, 2)
	orInt(&l.PFsPerNode, 1)
	orInt(&l.VFsPerPF, 6)
	orString(&l.VFDriver, VFDriverVFIO)
	orString(&l.VFAllocation, VFAllocationDevicePlugin)
	orString(&l.ResourcePrefix, DefaultResourcePrefix)
	orString(&l.ResourceName, DefaultResourceName)
	orString(&l.NodeLabel, DefaultNodeLabel)
	orString(&l.CNI, CNIFlannel)
	orString(&l.K3sImage, DefaultK3sImage)
	orInt(&l.APIPort, 6443)
	if l.Registry.Enabled == nil {
		l.Registry.Enabled = ptr(true)
	}
	orString(&l.Registry.Address, DefaultRegistryAddr)
	orString(&l.Registry.Image, DefaultRegistryImage)
	orString(&l.SysfsRoot, DefaultSysfsRoot)
	orString(&l.VFIODir, DefaultVFIODir)
	orString(&l.StateDir, DefaultStateDir)
	orString(&l.Kubelet.CPUManagerPolicy, "static")
	orString(&l.Kubelet.KubeReserved, "cpu=500m")
	orString(&l.Kubelet.SystemReserved, "cpu=500m")
	// kind-sriov's provider sets single-numa-node
	// (kubevirt/kubevirtci cluster-up/cluster/kind-sriov/provider.sh@39bd4947ba4d);
	// the scope is kubelet's default (kubernetes/kubernetes
	// pkg/kubelet/apis/config/v1beta1/defaults.go@v1.35.5).
	orString(&l.Kubelet.TopologyManagerPolicy, TopologyPolicySingleNumaNode)
	orString(&l.Kubelet.TopologyManagerScope, TopologyScopeContainer)
	// kind-sriov keeps etcd in memory unless told not to
	// (KUBEVIRT_WITH_KIND_ETCD_IN_MEMORY defaults to true,
	// kubevirt/kubevirtci cluster-up/cluster/kind/common.sh@39bd4947ba4d).
	if l.Server.DatastoreOnTmpfs == nil {
		l.Server.DatastoreOnTmpfs = ptr(true)
	}
	// kubevirtci leaves IPFAMILY empty, i.e. kind's default, IPv4.
	orString(&l.IPFamily, IPFamilyIPv4)
	if l.WaitTimeout.Duration == 0 {
		l.WaitTimeout.Duration = DefaultWaitTimeout
	}
}

func ptr[T any](v T) *T { return &v }

// RegistryEnabled reports whether the lane runs a local registry.
func (l *Lane) RegistryEnabled() bool { return l.Registry.Enabled == nil || *l.Registry.Enabled }

// DatastoreOnTmpfs reports whether the server's datastore is on a tmpfs.
func (l *Lane) DatastoreOnTmpfs() bool {
	return l.Server.DatastoreOnTmpfs == nil || *l.Server.DatastoreOnTmpfs
}

// ClusterName is the k3d cluster's name; containers are k3d-<name>-agent-N.
func (l *Lane) ClusterName() string { return l.Name }

// EngineCLI is the command a user runs on the lane's node containers:
// the engine up recorded, docker for a lane saved before it did.
func (l *Lane) EngineCLI() string {
	if l.ContainerEngine == "" {
		return EngineDocker
	}
	return l.ContainerEngine
}

// Dir is this lane's directory in its state dir: its journal, saved config
// and outputs (pkg/statedir names each).
func (l *Lane) Dir() statedir.LaneDir { return statedir.Dir(l.StateDir).Lane(l.Name) }

// KubeconfigPath is where the lane's kubeconfig is: the one asked for, or
// the default in the lane's directory.
func (l *Lane) KubeconfigPath() string {
	if l.Kubeconfig != "" {
		return l.Kubeconfig
	}
	return l.Dir().Kubeconfig()
}

// PFsNeeded is how many PFs the lane takes: pfsPerNode for each agent.
func (l *Lane) PFsNeeded() int { return l.Agents * l.PFsPerNode }

// EnoughVFs reports whether a PF whose sriov_totalvfs is totalVFs can give
// the lane its vfsPerPF VFs: lease, check and plan take no PF that cannot.
func (l *Lane) EnoughVFs(totalVFs int) bool { return totalVFs >= l.VFsPerPF }

// NodeLabelKV splits NodeLabel into key and value.
func (l *Lane) NodeLabelKV() (string, string) {
	for i := 0; i < len(l.NodeLabel); i++ {
		if l.NodeLabel[i] == '=' {
			return l.NodeLabel[:i], l.NodeLabel[i+1:]
		}
	}
	return l.NodeLabel, ""
}

// Resource is the extended resource the VFs are advertised as.
func (l *Lane) Resource() string { return l.ResourcePrefix + "/" + l.ResourceName }

// orString and orInt set an unset (zero) field to its default.
func orString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func orInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}
