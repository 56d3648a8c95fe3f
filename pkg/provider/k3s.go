package provider

import (
	k3dtypes "github.com/k3d-io/k3d/v5/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// K3sDisabled are k3s's packaged components a lane turns off with
// `--disable` (names from k3s-io/k3s pkg/cli/cmds/stage.go@v1.35.5+k3s1
// DisableItems, the list pkg/cli/cmds/server.go's flag names), the same
// set kind and kubevirtci's kind-sriov run without:
//
//   - traefik: an ingress controller no lane test uses, deployed by
//     helm-controller as a HelmChart (another job pod and a LoadBalancer
//     Service per up).
//   - servicelb: k3s's LoadBalancer implementation (klipper-lb DaemonSet
//     pods per Service); a test lane has no external load balancer, as kind
//     has none.
//   - metrics-server: its aggregated APIService v1beta1.metrics.k8s.io makes
//     discovery depend on a pod; while that pod is not serving, discovery
//     fails for the group, which reset's and the baseline's discovery would
//     meet (and the namespace controller with them). kind has none either.
//
// Fewer pods per node also leave the nodes' CPU to the tests.
var K3sDisabled = []string{"traefik", "servicelb", "metrics-server"}

// K3sComponent is one packaged component a lane keeps: its `--disable`
// name, the Deployment k3s deploys for it in kube-system and the images it
// pulls (as k3s names them, registry host explicit).
type K3sComponent struct {
	Name       string
	Deployment string
	Images     []string
}

// Images k3s pulls itself in a lane on config.DefaultK3sImage
// (v1.35.5+k3s1), as the release's manifests name them (k3s-io/k3s
// manifests/coredns.yaml@v1.35.5+k3s1: rancher/mirrored-coredns-coredns:1.14.3;
// manifests/local-storage.yaml@v1.35.5+k3s1: rancher/local-path-provisioner:v0.0.36
// and the helper pod's rancher/mirrored-library-busybox:1.37.0; read at
// 6a4781ad), with k3s's %{SYSTEM_DEFAULT_REGISTRY}% empty, so Docker Hub.
// The sandbox image is --pause-image's default (pkg/cli/cmds/agent.go@v1.35.5+k3s1:
// rancher/mirrored-pause:3.6; https://github.com/k3s-io/k3s/issues/14384,
// "K3s is still using pause image 3.6", bumped to 3.10.2 from v1.35.6).
// The release's airgap image list names the same four
// (scripts/airgap/image-list.txt@v1.35.5+k3s1).
const (
	K3sPauseImage           = "docker.io/rancher/mirrored-pause:3.6"
	K3sCoreDNSImage         = "docker.io/rancher/mirrored-coredns-coredns:1.14.3"
	K3sLocalPathImage       = "docker.io/rancher/local-path-provisioner:v0.0.36"
	K3sLocalPathHelperImage = "docker.io/rancher/mirrored-library-busybox:1.37.0"
)

// K3sKept are the packaged components a lane leaves on, and why:
//
//   - coredns: the cluster's DNS, which KubeVirt-style tests resolve
//     Services through; k3d v5.9.0 also rewrites its ConfigMap manifest on
//     the server to add host entries (pkg/client/cluster.go, ClusterRun's
//     post-start actions) and waits for k3s to log it.
//   - local-storage: local-path-provisioner and the default StorageClass
//     local-path; kind ships a default StorageClass too, and tests that
//     create PVCs without naming a class need one.
//
// k3s's other default manifests (ccm.yaml, rolebindings.yaml,
// runtimes.yaml) are RBAC objects and RuntimeClasses: no pods, no images.
var K3sKept = []K3sComponent{
	{Name: "coredns", Deployment: "coredns", Images: []string{K3sCoreDNSImage}},
	{Name: "local-storage", Deployment: "local-path-provisioner", Images: []string{K3sLocalPathImage, K3sLocalPathHelperImage}},
}

// k3sDisableArgs are the server's `--disable` flags, one per component.
func k3sDisableArgs() []string {
	out := make([]string, 0, len(K3sDisabled))
	for _, c := range K3sDisabled {
		out = append(out, "--disable="+c)
	}
	return out
}

// K3sNodeImages are the images every lane's nodes pull through their
// containerd for k3s itself: the sandbox image, then the kept components'.
// They are read at the k3s release of config.DefaultK3sImage; known is
// false for a lane on another k3s image, whose own images these may not be.
func K3sNodeImages(l *config.Lane) (images []string, known bool) {
	images = []string{K3sPauseImage}
	for _, c := range K3sKept {
		images = append(images, c.Images...)
	}
	return images, l.K3sImage == config.DefaultK3sImage
}

// HostImage is an image the host's Docker pulls for a lane, and what for.
type HostImage struct{ Image, For string }

// HostImages are the images the host's Docker pulls for a lane (k3d pulls
// what is not there): the node image, k3d's tools image and the lane
// registry's. No registry mirror applies to them.
func HostImages(l *config.Lane) []HostImage {
	tools := l.ToolsImage
	if tools == "" {
		// What k3d uses as a library: no release version is linked in, so
		// the tag is "latest" (k3d-io/k3d pkg/types/images.go@v5.9.0).
		tools = k3dtypes.GetToolsImage()
	}
	out := []HostImage{{l.K3sImage, "node image"}, {tools, "k3d tools"}}
	if l.RegistryEnabled() {
		out = append(out, HostImage{l.Registry.Image, "lane registry"})
	}
	return out
}
