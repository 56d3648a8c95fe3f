package cni

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Defaults applied by Options.WithDefaults.
const (
	DefaultNamespace      = "kube-system"
	DefaultCNIConfDir     = "/etc/cni/net.d"
	DefaultCNIBinDir      = "/opt/cni/bin"
	DefaultK3sBinDir      = "/bin"
	DefaultMultusMemLimit = "512Mi"
	DevicePluginConfigMap = "sriovdp-config"
	DevicePluginConfigKey = "config.json"
	ManagedByLabelValue   = "sriov-lane"
	managedByLabel        = "app.kubernetes.io/managed-by"
	// ResourceNameAnnotation tells Multus which device-plugin resource
	// backs a NetworkAttachmentDefinition.
	ResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"
	FieldManager           = "sriov-lane"
)

// defaultCNIPlugins are the standard plugins copied from k3s into the CNI bin
// dir: flannel delegates to bridge + host-local and chains portmap,
// containerd needs loopback, and bandwidth is commonly chained.
var defaultCNIPlugins = []string{"bandwidth", "bridge", "host-local", "loopback", "portmap"}

// Options is everything the objects depend on. pkg/lane maps a validated
// lane config to it (lane.CNIOptions); the fields that come from the lane
// config are taken as they are, the others take the defaults documented per
// field when zero.
type Options struct {
	// CNI is the primary network: config.CNIFlannel or config.CNICalico.
	CNI string
	// ResourcePrefix and ResourceName make the extended resource
	// <prefix>/<name> (e.g. kubevirt.io/sriov_net).
	ResourcePrefix string
	ResourceName   string
	// NodeSelectorKey/Value is the label on SR-IOV nodes; the sriov-cni and
	// device plugin DaemonSets select on it.
	NodeSelectorKey   string
	NodeSelectorValue string
	// PFNames are the PF interface names as seen inside the nodes. Required.
	PFNames []string
	// VFDriver is config.VFDriverVFIO or config.VFDriverNetdevice.
	VFDriver string
	// VFAllocation is config.VFAllocationDevicePlugin (sriov-cni and the
	// device plugin; the default when empty) or config.VFAllocationDRA
	// (dra-driver-sriov in their place).
	VFAllocation string
	// ImageRegistryMirror, when set, rewrites every image (see MirrorImage).
	ImageRegistryMirror string
	// Namespace of sriov-cni, the device plugin and its ConfigMap
	// (default kube-system).
	Namespace string
	// IPFamily is config.IPFamilyIPv4, IPFamilyIPv6 or IPFamilyDual.
	IPFamily string
	// CNIConfDir and CNIBinDir are the node's CNI dirs; with k3s
	// --flannel-backend=none containerd's defaults /etc/cni/net.d and
	// /opt/cni/bin apply.
	CNIConfDir string
	CNIBinDir  string
	// K3sBinDir is where k3s ships its CNI plugins on each node: the
	// image's /bin (default), where k3d nodes unpack k3s's data archive.
	K3sBinDir string
	// CNIPlugins are copied from K3sBinDir into CNIBinDir (flannel mode).
	CNIPlugins []string
	// MultusMemoryLimit is the Multus daemon's memory limit (default 512Mi;
	// upstream's 50Mi is OOM-killed, multus-cni#1346).
	MultusMemoryLimit string
	// SmokeNamespace holds verify's smoke objects (pkg/smoke; default
	// "default").
	SmokeNamespace string
	// Calico settings (CNI "calico").
	Calico CalicoOptions
	// NetworkResourcesInjector deploys network-resources-injector (off by
	// default; see injector.go).
	NetworkResourcesInjector InjectorOptions

	// networks are the pod CIDRs for CNI and IPFamily (config.NetworksOf),
	// set by WithDefaults.
	networks config.Networks
}

// CalicoOptions locate the pinned Calico manifests.
type CalicoOptions struct {
	// ManifestDir, when set, holds the release's manifests under their
	// upstream names (air-gapped hosts); they are read instead of
	// downloaded, and still verified against their pinned digests.
	ManifestDir string
	// CacheDir caches verified downloads. Empty disables caching.
	CacheDir string
	// BaseURL and Manifests default to CalicoManifestBaseURL and
	// CalicoManifests.
	BaseURL   string
	Manifests []ManifestRef
	// Offline never downloads: a manifest with no local copy is reported
	// as pending (plan on a machine without network).
	Offline bool
	// HTTPClient defaults to a client with a 2-minute timeout.
	HTTPClient *http.Client
}

// WithDefaults returns a copy with this package's own defaults filled in,
// or an error naming the first invalid field. What the lane config holds
// (CNI, IP family, VF driver, resource and node label) comes from a lane
// config.Validate accepted, and is taken as it is.
func (o Options) WithDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	switch o.VFAllocation {
	case "":
		o.VFAllocation = config.VFAllocationDevicePlugin
	case config.VFAllocationDevicePlugin, config.VFAllocationDRA:
	default:
		return o, fmt.Errorf("VF allocation %q: want %s or %s", o.VFAllocation, config.VFAllocationDevicePlugin, config.VFAllocationDRA)
	}
	if o.SmokeNamespace == "" {
		o.SmokeNamespace = "default"
	}
	if o.CNIConfDir == "" {
		o.CNIConfDir = DefaultCNIConfDir
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = DefaultCNIBinDir
	}
	if o.K3sBinDir == "" {
		o.K3sBinDir = DefaultK3sBinDir
	}
	if len(o.CNIPlugins) == 0 {
		o.CNIPlugins = slices.Clone(defaultCNIPlugins)
	}
	if o.MultusMemoryLimit == "" {
		o.MultusMemoryLimit = DefaultMultusMemLimit
	}
	if o.Calico.BaseURL == "" {
		o.Calico.BaseURL = CalicoManifestBaseURL
	}
	if len(o.Calico.Manifests) == 0 {
		o.Calico.Manifests = slices.Clone(CalicoManifests)
	}
	o.networks = config.NetworksOf(o.CNI, o.IPFamily)
	for _, p := range o.CNIPlugins {
		if p == "" || strings.ContainsAny(p, "/\\") || strings.HasPrefix(p, ".") {
			return o, fmt.Errorf("CNI plugin name %q: a plain file name is required", p)
		}
	}
	// Sorted and deduplicated so the plan does not depend on discovery order.
	o.PFNames = slices.Compact(slices.Sorted(slices.Values(o.PFNames)))
	if len(o.PFNames) == 0 || o.PFNames[0] == "" {
		return o, fmt.Errorf("no PF names: the device plugin would select nothing")
	}
	return o, nil
}

// Resource is the extended resource name the device plugin advertises.
func (o Options) Resource() string { return o.ResourcePrefix + "/" + o.ResourceName }

func (o Options) image(ref string) string { return MirrorImage(o.ImageRegistryMirror, ref) }
