package config

import "time"

const (
	APIVersion = "sriov-lane.io/v1alpha1"
	Kind       = "Lane"
)

// VF drivers the lane knows how to prepare: the values of vfDriver, the
// one place they are spelled (pkg/sriov binds VFs by them, pkg/cni selects
// them). VFDriverVFIO is also the name of the kernel driver the VFs are
// bound to; VFDriverNetdevice leaves them to their kernel VF driver.
const (
	VFDriverVFIO      = "vfio-pci"
	VFDriverNetdevice = "netdevice"
)

// How the lane hands VFs to pods: the values of vfAllocation. The device
// plugin advertises them as an extended resource; DRA publishes them in
// ResourceSlices through dra-driver-sriov, as kubevirtci's kind-sriov does
// with KUBEVIRT_USE_DRA=true (kubevirt/kubevirtci
// cluster-up/cluster/kind-sriov/config_sriov_cluster.sh@39bd4947ba4d).
const (
	VFAllocationDevicePlugin = "devicePlugin"
	VFAllocationDRA          = "dra"
)

// IP families of the cluster network (kubevirtci's IPFAMILY values,
// kubevirt/kubevirtci cluster-up/cluster/kind/common.sh@39bd4947ba4d).
const (
	IPFamilyIPv4 = "ipv4"
	IPFamilyIPv6 = "ipv6"
	IPFamilyDual = "dual"
)

// Kubelet topology manager policies and scopes, as kubelet spells them
// (kubernetes/kubernetes pkg/kubelet/apis/config/validation/validation.go@v1.35.5).
const (
	TopologyPolicyNone           = "none"
	TopologyPolicyBestEffort     = "best-effort"
	TopologyPolicyRestricted     = "restricted"
	TopologyPolicySingleNumaNode = "single-numa-node"
	TopologyScopeContainer       = "container"
	TopologyScopePod             = "pod"
)

// Container engines a lane's nodes can run on, both through the Docker
// API (pkg/provider picks the engine's socket and says what each differs in).
const (
	EngineDocker = "docker"
	EnginePodman = "podman"
)

// CNIs the lane can deploy as the cluster's primary network (pkg/cni
// builds them, pkg/config picks their pod networks).
const (
	CNIFlannel = "flannel"
	CNICalico  = "calico"
)

// Lane is the whole configuration of one lane. Field names are the YAML keys.
type Lane struct {
	// APIVersion is the file format's version, sriov-lane.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is Lane.
	Kind string `json:"kind"`

	// Name is the lane's (and the k3d cluster's) name.
	Name string `json:"name"`
	// Agents is the number of k3s agents; each gets PFsPerNode PFs.
	Agents int `json:"agents"`
	// PFsPerNode is how many PFs are moved into each agent's network
	// namespace.
	PFsPerNode int `json:"pfsPerNode"`
	// VFsPerPF is how many VFs are created on each PF.
	VFsPerPF int `json:"vfsPerPF"`
	// VFDriver is vfio-pci (VMs) or netdevice (kernel VF netdevs moved into the node).
	VFDriver string `json:"vfDriver"`
	// VFAllocation is how pods get VFs: devicePlugin (an extended resource,
	// resourcePrefix/resourceName) or dra (ResourceClaims of the
	// dra-driver-sriov DeviceClass; kubevirtci's KUBEVIRT_USE_DRA=true).
	VFAllocation string `json:"vfAllocation"`
	// ResourcePrefix is the prefix of the extended resource the device
	// plugin advertises the VFs as (resourcePrefix/resourceName).
	ResourcePrefix string `json:"resourcePrefix"`
	// ResourceName is the name of that extended resource.
	ResourceName string `json:"resourceName"`
	// NodeLabel is key=value put on every agent that got PFs; the SR-IOV
	// DaemonSets select on it.
	NodeLabel string `json:"nodeLabel"`
	// CNI is the cluster's primary network: flannel or calico.
	CNI string `json:"cni"`
	// IPFamily is the cluster network's IP family: ipv4, ipv6 or dual
	// (kubevirtci's IPFAMILY).
	IPFamily string `json:"ipFamily"`
	// ContainerEngine is what runs the lane's nodes: docker or podman
	// (rootful). Empty, the engine DOCKER_HOST names, else Docker's socket
	// if it exists, else Podman's; up records the engine it found, so every
	// later command of the lane talks to the same one.
	ContainerEngine string `json:"containerEngine,omitempty"`
	// K3sImage is the node image, pinned to a real rancher/k3s release.
	K3sImage string `json:"k3sImage"`
	// ToolsImage overrides k3d's tools image (air-gapped hosts, mirrors).
	ToolsImage string `json:"toolsImage,omitempty"`
	// APIPort is the host port of the Kubernetes API on 127.0.0.1.
	APIPort int `json:"apiPort"`
	// Registry is the lane's local image registry.
	Registry Registry `json:"registry"`
	// PFs narrows which of the host's PFs the lane may take.
	PFs PFSelect `json:"pfs"`
	// SysfsRoot is where the host's sysfs is read and written (e.g. a host
	// /sys mounted elsewhere in a CI pod).
	SysfsRoot string `json:"sysfsRoot"`
	// VFIODir is the host's VFIO device directory, mounted into agents.
	VFIODir string `json:"vfioDir"`
	// StateDir holds each lane's journal, saved config, kubeconfig and the
	// rest of the layout pkg/statedir names, and the host's PF leases.
	StateDir string `json:"stateDir"`
	// Volumes are extra mounts, HOST:CONTAINER[:ro]@NODEFILTER[;NODEFILTER...].
	Volumes []string `json:"volumes,omitempty"`
	// ImageRegistryMirror, [http://|https://]HOST[:PORT], is the registry
	// every image the nodes pull comes through, the components' and k3s's
	// own (no path: k3s would take it as the registry's API root).
	ImageRegistryMirror string `json:"imageRegistryMirror,omitempty"`
	// Kubelet holds the agents' kubelet settings.
	Kubelet Kubelet `json:"kubelet"`
	// Server holds the k3s server node's settings.
	Server Server `json:"server"`
	// Kubeconfig is where the lane's kubeconfig is written (mode 0600).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Calico holds the settings of cni: calico.
	Calico Calico `json:"calico,omitempty"`
	// Hooks are commands run after up and before down.
	Hooks Hooks `json:"hooks,omitempty"`
	// WaitTimeout bounds each of up's waits (the cluster's create, nodes
	// Ready, components rolled out, VFs advertised) and repair's.
	WaitTimeout Duration `json:"waitTimeout"`

	// Components switches optional network components on.
	Components Components `json:"components"`
}

// Components are optional network components, all off by default.
type Components struct {
	// NetworkResourcesInjector deploys network-resources-injector, a
	// webhook that adds to a pod the VF resource requests of the
	// NetworkAttachmentDefinitions it names (their
	// k8s.v1.cni.cncf.io/resourceName), as kubevirtci's kind-sriov does.
	NetworkResourcesInjector bool `json:"networkResourcesInjector"`
}

// Registry is the lane's local image registry for the dev loop.
type Registry struct {
	// Enabled runs the registry beside the lane's nodes, which reach it
	// as registry:5000.
	Enabled *bool `json:"enabled"`
	// Address is the host side, HOST:PORT (127.0.0.1:5000).
	Address string `json:"address"`
	// Image is the registry's image, pulled by the host's Docker.
	Image string `json:"image"`
}

// PFSelect narrows which PFs the lane may take. Entries are interface
// names, PCI addresses or globs of either; a PF the host uses (default route,
// global address) is taken only when Include names it exactly.
type PFSelect struct {
	// Include lists the PFs the lane may take; empty, any it finds but
	// those the host uses.
	Include []string `json:"include,omitempty"`
	// Exclude lists PFs the lane must not take.
	Exclude []string `json:"exclude,omitempty"`
}

// Kubelet settings applied to agents (kubevirtci's CPU-manager and
// topology-manager set-up).
type Kubelet struct {
	// CPUManagerPolicy is kubelet's --cpu-manager-policy: static
	// (kind-sriov's) or none.
	CPUManagerPolicy string `json:"cpuManagerPolicy"`
	// KubeReserved is kubelet's --kube-reserved (the static CPU manager
	// needs a reservation).
	KubeReserved string `json:"kubeReserved"`
	// SystemReserved is kubelet's --system-reserved.
	SystemReserved string `json:"systemReserved"`
	// TopologyManagerPolicy is kubelet's --topology-manager-policy: none,
	// best-effort, restricted or single-numa-node (kind-sriov's).
	TopologyManagerPolicy string `json:"topologyManagerPolicy"`
	// TopologyManagerScope is kubelet's --topology-manager-scope:
	// container (kubelet's default) or pod.
	TopologyManagerScope string `json:"topologyManagerScope"`
}

// Server settings for the k3s server node.
type Server struct {
	// DatastoreOnTmpfs puts the server's datastore directory
	// (/var/lib/rancher/k3s/server/db) on a tmpfs, as kind-sriov puts etcd
	// in memory. Faster; the datastore does not survive the container.
	DatastoreOnTmpfs *bool `json:"datastoreOnTmpfs"`
}

// Calico settings for cni: calico.
type Calico struct {
	// ManifestDir holds the pinned release's manifests under their
	// upstream names (operator-crds.yaml, tigera-operator.yaml) and
	// replaces the download (air-gapped hosts); each is still checked
	// against its pinned sha256.
	ManifestDir string `json:"manifestDir,omitempty"`
}

// Hooks are commands run at fixed points of the lane's life.
type Hooks struct {
	// PostUp are commands, each an argv list, run once the lane is up,
	// with KUBECONFIG, SRIOV_LANE_NAME and SRIOV_LANE_PFS (a JSON list of
	// the PFs in the agents) set; one that fails fails up, which undoes
	// itself.
	PostUp [][]string `json:"postUp,omitempty"`
	// PreDown are commands, as PostUp's, run before down tears the lane
	// down.
	PreDown [][]string `json:"preDown,omitempty"`
}

// Duration is a time.Duration written as "10m" in YAML and JSON.
type Duration struct{ time.Duration }
