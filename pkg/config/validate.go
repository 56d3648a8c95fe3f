package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// InvalidError is bad input: the CLI exits 2 for it, before any host change.
type InvalidError struct {
	Field   string
	Problem string
	Hint    string
}

func (e *InvalidError) Error() string {
	s := fmt.Sprintf("invalid %s: %s", e.Field, e.Problem)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// IsInvalid reports whether err is (or wraps) bad user input.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

func invalid(field, hint, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Problem: fmt.Sprintf(format, args...), Hint: hint}
}

var (
	// k3d prefixes node names with k3d-<name>-agent-NN, which must stay a
	// valid hostname (63 bytes), hence the short limit.
	nameRE      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	dnsSubRE    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	labelKeyRE  = regexp.MustCompile(`^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	labelValRE  = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$`)
	maxNameLen  = 32
	maxAgents   = 16
	maxVFsPerPF = 256
)

// resNameRE is the device plugin's resourceName rule, ^[a-zA-Z0-9_-]+$
// (k8snetworkplumbingwg/sriov-network-device-plugin pkg/utils/utils.go@v3.11.0
// ValidResourceName: with a '.' the plugin exits, serving nothing), within
// kubelet's for the name part of an extended resource: starting and ending
// with a letter or digit, at most 63 characters (k8s.io/kubernetes
// pkg/apis/core/v1/helper/helpers.go@v1.36.3 IsExtendedResourceName, by
// validation.IsQualifiedName; kubelet checks it when the plugin registers,
// pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go@v1.36.3).
var (
	resNameRE     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?$`)
	maxResNameLen = 63
)

// Validate checks l for everything that can be known without looking at the
// host, returning every problem at once.
func Validate(l *Lane) error {
	var errs []error
	add := func(e *InvalidError) { errs = append(errs, e) }
	if l.APIVersion != APIVersion {
		add(invalid("apiVersion", "use "+APIVersion, "%q is not supported", l.APIVersion))
	}
	if l.Kind != Kind {
		add(invalid("kind", "use "+Kind, "%q is not supported", l.Kind))
	}
	if !nameRE.MatchString(l.Name) || len(l.Name) > maxNameLen {
		add(invalid("name", "lower-case letters, digits and '-', at most 32 characters, e.g. sriov", "%q", l.Name))
	}
	if l.Agents < 1 || l.Agents > maxAgents {
		add(invalid("agents", "each agent takes its own PFs", "%d is outside 1..%d", l.Agents, maxAgents))
	}
	if l.PFsPerNode < 1 {
		add(invalid("pfsPerNode", "at least 1 PF per agent", "%d", l.PFsPerNode))
	}
	if l.VFsPerPF < 1 || l.VFsPerPF > maxVFsPerPF {
		add(invalid("vfsPerPF", "the PF's sriov_totalvfs is checked too", "%d is outside 1..%d", l.VFsPerPF, maxVFsPerPF))
	}
	if l.VFDriver != VFDriverVFIO && l.VFDriver != VFDriverNetdevice {
		add(invalid("vfDriver", "one of vfio-pci, netdevice", "%q is unknown", l.VFDriver))
	}
	for _, e := range checkVFAllocation(l) {
		add(e)
	}
	if l.CNI != CNIFlannel && l.CNI != CNICalico {
		add(invalid("cni", "one of flannel, calico", "%q is unknown", l.CNI))
	}
	switch l.ContainerEngine {
	case "", EngineDocker, EnginePodman:
	default:
		add(invalid("containerEngine", "docker or podman (kubevirtci's CRI_BIN), or unset to find the engine", "%q is unknown", l.ContainerEngine))
	}
	switch l.IPFamily {
	case IPFamilyIPv4, IPFamilyIPv6, IPFamilyDual:
	default:
		add(invalid("ipFamily", "one of ipv4, ipv6, dual (kubevirtci's IPFAMILY)", "%q is unknown", l.IPFamily))
	}
	if !dnsSubRE.MatchString(l.ResourcePrefix) {
		add(invalid("resourcePrefix", "a DNS subdomain such as kubevirt.io", "%q", l.ResourcePrefix))
	}
	if !resNameRE.MatchString(l.ResourceName) || len(l.ResourceName) > maxResNameLen {
		add(invalid("resourceName", "letters, digits, '_' and '-', at most 63 characters, starting and ending with a letter or digit, e.g. sriov_net", "%q", l.ResourceName))
	}
	if k, v, ok := strings.Cut(l.NodeLabel, "="); !ok || !labelKeyRE.MatchString(k) || !labelValRE.MatchString(v) || len(v) > 63 {
		add(invalid("nodeLabel", "key=value, e.g. sriov_capable=true", "%q", l.NodeLabel))
	}
	if strings.TrimSpace(l.K3sImage) == "" {
		add(invalid("k3sImage", "a rancher/k3s image reference", "empty"))
	}
	if l.APIPort < 1 || l.APIPort > 65535 {
		add(invalid("apiPort", "a TCP port, e.g. 6443", "%d", l.APIPort))
	}
	if l.RegistryEnabled() {
		host, port, err := net.SplitHostPort(l.Registry.Address)
		p, perr := strconv.Atoi(port)
		if err != nil || net.ParseIP(host) == nil || perr != nil || p < 1 || p > 65535 {
			add(invalid("registry.address", "IP:PORT, e.g. 127.0.0.1:5000", "%q", l.Registry.Address))
		} else if p == l.APIPort {
			add(invalid("registry.address", "pick another port than apiPort", "port %d is also the API port", p))
		}
	}
	if m := strings.TrimSpace(l.ImageRegistryMirror); m != "" {
		if err := checkMirror(m); err != nil {
			add(invalid("imageRegistryMirror", "[http://|https://]HOST[:PORT], e.g. http://10.0.0.5:5000 (http:// for a plain-HTTP registry)", "%q: %v", m, err))
		}
	}
	for _, f := range []struct{ name, val string }{{"sysfsRoot", l.SysfsRoot}, {"stateDir", l.StateDir}, {"vfioDir", l.VFIODir}} {
		if !filepath.IsAbs(f.val) {
			add(invalid(f.name, "an absolute path", "%q", f.val))
		}
	}
	for i, p := range append(append([]string{}, l.PFs.Include...), l.PFs.Exclude...) {
		if _, err := filepath.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
			add(invalid(fmt.Sprintf("pfs[%d]", i), "an interface name, PCI address or glob", "%q", p))
		}
	}
	for i, v := range l.Volumes {
		if _, err := ParseVolume(v); err != nil {
			add(invalid(fmt.Sprintf("volumes[%d]", i), "HOST:CONTAINER[:ro]@NODEFILTER, e.g. /data:/data@agent:*", "%v", err))
		}
	}
	if l.WaitTimeout.Duration <= 0 {
		add(invalid("waitTimeout", "e.g. 10m", "%s must be positive", l.WaitTimeout.Duration))
	}
	if l.Kubelet.CPUManagerPolicy != "static" && l.Kubelet.CPUManagerPolicy != "none" {
		add(invalid("kubelet.cpuManagerPolicy", "static or none", "%q", l.Kubelet.CPUManagerPolicy))
	}
	// Kubelet refuses any other policy or scope at start-up, which would
	// leave the agents NotReady after the PFs moved; it ties neither to the
	// CPU manager policy, and ignores the scope under policy none
	// (kubernetes/kubernetes pkg/kubelet/apis/config/validation/validation.go
	// and pkg/kubelet/cm/topologymanager/topology_manager.go@v1.35.5).
	switch l.Kubelet.TopologyManagerPolicy {
	case TopologyPolicyNone, TopologyPolicyBestEffort, TopologyPolicyRestricted, TopologyPolicySingleNumaNode:
	default:
		add(invalid("kubelet.topologyManagerPolicy", "none, best-effort, restricted or single-numa-node", "%q", l.Kubelet.TopologyManagerPolicy))
	}
	if l.Kubelet.TopologyManagerScope != TopologyScopeContainer && l.Kubelet.TopologyManagerScope != TopologyScopePod {
		add(invalid("kubelet.topologyManagerScope", "container or pod", "%q", l.Kubelet.TopologyManagerScope))
	}
	for i, h := range append(append([][]string{}, l.Hooks.PostUp...), l.Hooks.PreDown...) {
		if len(h) == 0 || h[0] == "" {
			add(invalid(fmt.Sprintf("hooks[%d]", i), "a command and its arguments, e.g. [\"./hack/after-up.sh\"]", "empty command"))
		}
	}
	return errors.Join(errs...)
}

// k3sTagRE reads the Kubernetes minor version from a rancher/k3s tag
// (v1.35.5-k3s1, v1.35.5+k3s1).
var k3sTagRE = regexp.MustCompile(`:v1\.(\d+)\.\d+[-+]k3s\d+$`)

// DRAMinKubeMinor is the first Kubernetes minor that serves DRA's
// resource.k8s.io/v1, on by default: the API group joined kube-apiserver's
// stable groups enabled by default and DynamicResourceAllocation went GA
// in 1.34 (kubernetes/kubernetes pkg/controlplane/instance.go and
// pkg/features/kube_features.go@v1.36.3; k8s.io/api@v0.33.13 has no
// resource/v1). dra-driver-sriov's chart asks for the same
// (k8snetworkplumbingwg/dra-driver-sriov
// deployments/helm/dra-driver-sriov/Chart.yaml@14490e9d438b kubeVersion).
const DRAMinKubeMinor = 34

// checkVFAllocation refuses a vfAllocation that is unknown, or dra with a
// k3s image too old to serve it or with the injector, whose requests are
// the device plugin's extended resource (kubevirtci deploys the injector
// only without DRA: kubevirt/kubevirtci
// cluster-up/cluster/kind-sriov/config_sriov_cluster.sh@39bd4947ba4d). An image whose tag says no
// version (a digest, a private tag) is checked by up against the API
// server instead.
func checkVFAllocation(l *Lane) []*InvalidError {
	switch l.VFAllocation {
	case VFAllocationDevicePlugin:
		return nil
	case VFAllocationDRA:
	default:
		return []*InvalidError{invalid("vfAllocation", "devicePlugin or dra", "%q is unknown", l.VFAllocation)}
	}
	var errs []*InvalidError
	if m := k3sTagRE.FindStringSubmatch(l.K3sImage); m != nil {
		if minor, _ := strconv.Atoi(m[1]); minor < DRAMinKubeMinor {
			errs = append(errs, invalid("vfAllocation", fmt.Sprintf("use a k3s image of Kubernetes 1.%d or later, e.g. %s, or vfAllocation devicePlugin", DRAMinKubeMinor, DefaultK3sImage),
				"dra needs the resource.k8s.io/v1 API, which k3sImage %s (Kubernetes 1.%s) does not serve", l.K3sImage, m[1]))
		}
	}
	if l.Components.NetworkResourcesInjector {
		errs = append(errs, invalid("components.networkResourcesInjector", "leave it off with vfAllocation dra, as kubevirtci's KUBEVIRT_USE_DRA does; pods name a ResourceClaim instead",
			"the injector adds %s requests from NetworkAttachmentDefinitions, an extended resource that only vfAllocation devicePlugin advertises", l.Resource()))
	}
	return errs
}

// Volume is an extra mount for the nodes.
type Volume struct {
	Host, Container string
	ReadOnly        bool
	NodeFilters     []string
}

// ParseVolume parses HOST:CONTAINER[:ro|rw]@FILTER[;FILTER...] (k3d's syntax).
func ParseVolume(s string) (Volume, error) {
	spec, filters, _ := strings.Cut(s, "@")
	parts := strings.Split(spec, ":")
	var v Volume
	switch {
	case len(parts) == 2:
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		v.ReadOnly = parts[2] == "ro"
	default:
		return v, fmt.Errorf("%q is not HOST:CONTAINER[:ro]", spec)
	}
	v.Host, v.Container = parts[0], parts[1]
	if !filepath.IsAbs(v.Host) || !filepath.IsAbs(v.Container) {
		return v, fmt.Errorf("%q: both paths must be absolute", spec)
	}
	if filters == "" {
		filters = "all"
	}
	for _, f := range strings.Split(filters, ";") {
		if !regexp.MustCompile(`^(all|server|servers|agent|agents)(:(\*|\d+))?$`).MatchString(f) {
			return v, fmt.Errorf("node filter %q: use server:0, agent:*, agent:1 or all", f)
		}
		v.NodeFilters = append(v.NodeFilters, f)
	}
	return v, nil
}

// checkMirror accepts a registry at a host's root: an optional http/https
// scheme (none means https: k3s-io/k3s
// pkg/agent/containerd/config.go@v1.35.5+k3s1 normalizeEndpointAddress)
// and a host with an optional port. A path is refused: the lane would use
// it twice, and differently. Component images are referenced as
// HOST/PATH/REPO (a repository prefix under the registry's /v2), while k3s
// takes an endpoint's path as the registry's API root (the same function
// keeps any path but "", "/" and "/v2" and writes override_path = true
// into hosts.toml, pkg/agent/templates/templates.go@v1.35.5+k3s1), where
// containerd requests HOST/PATH/REPO/manifests/TAG with no /v2
// (containerd/containerd core/remotes/docker/config/hosts.go@v2.2.3
// parseHostConfig; docs/hosts.md@v2.2.3 override_path). No registry
// serves both, so k3s's own images and the components' would not come
// from the same place.
func checkMirror(m string) error {
	rest := m
	if scheme, after, ok := strings.Cut(m, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return fmt.Errorf("scheme %q: use http or https", scheme)
		}
		rest = after
	}
	host, path, _ := strings.Cut(rest, "/")
	if host == "" {
		return fmt.Errorf("no registry host")
	}
	if strings.Trim(path, "/") != "" {
		return fmt.Errorf("path /%s: the mirror must serve its registry API at the host's root (/v2/), since k3s takes an endpoint's path as the API root while the lane's image references would take it as a repository prefix", strings.Trim(path, "/"))
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("port %q", port)
		}
		host = h
	}
	if net.ParseIP(strings.Trim(host, "[]")) == nil && !dnsSubRE.MatchString(host) {
		return fmt.Errorf("host %q is neither an IP address nor a DNS name", host)
	}
	return nil
}
