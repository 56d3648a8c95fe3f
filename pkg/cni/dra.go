package cni

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// DRA mode: dra-driver-sriov publishes the VFs in ResourceSlices and
// prepares claimed ones, in place of the device plugin and sriov-cni.
// The objects are those kubevirtci applies for KUBEVIRT_USE_DRA=true: the
// driver's Helm chart at the commit of the image it pins, rendered as
// release sriov-dra in namespace dra-driver-sriov with
// kubeletPlugin.enableDeviceMetadata=true and the chart's helm.sh/chart,
// app.kubernetes.io/version and managed-by labels removed
// (kubevirt/kubevirtci hack/bump-dra-driver-sriov.sh@39bd4947ba4d), plus
// the namespace its deploy_dra creates and the default policy it applies
// (cluster-up/cluster/kind-sriov/sriov-components/sriov_components.sh and
// manifests/dra/sriov_dra_default_policy.yaml@39bd4947ba4d). Where the lane
// differs, pkg/cni/conformance_test.go's TestConformanceDRA says why.
const (
	DRAComponent = "dra-driver-sriov"
	// DRADriverImage is what kubevirtci pins: the image of commit 14490e9,
	// which bundles nothing; its DaemonSet's init container is sriov-cni.
	DRADriverImage = "ghcr.io/k8snetworkplumbingwg/dra-driver-sriov:14490e9"
	// DRADriverName is the driver's name and its API group
	// (pkg/consts/consts.go@14490e9d438b): the DeviceClass, the slices'
	// spec.driver and the claims' allocation results all carry it.
	DRADriverName = "sriovnetwork.k8snetworkplumbingwg.io"
	// DRANamespace is where the driver runs and, as it watches only its
	// own namespace (cmd/dra-driver-sriov/main.go@14490e9d438b NAMESPACE),
	// where its SriovResourcePolicies must be.
	DRANamespace = "dra-driver-sriov"
	// DRADeviceClass is the chart's one class, selecting every device of
	// the driver.
	DRADeviceClass = DRADriverName
	// DRAPolicy is kubevirtci's default policy: one empty config, which
	// advertises every VF the driver discovers.
	DRAPolicy = "default-policy"

	draChartAt = "@14490e9d438b"
	draChart   = "k8snetworkplumbingwg/dra-driver-sriov deployments/helm/dra-driver-sriov/"
	// draFullname is the chart's fullname for release sriov-dra: the
	// release name does not contain the chart's name
	// (dra-driver-sriov-chart, Chart.yaml), so templates/_helpers.tpl
	// joins the two.
	draFullname  = "sriov-dra-dra-driver-sriov-chart"
	draDaemonSet = draFullname + "-kubeletplugin"
	draSA        = draFullname + "-service-account"
	draRole      = draFullname + "-role"
	draPolicyCRD = "sriovresourcepolicies." + DRADriverName
	draAttrsCRD  = "deviceattributes." + DRADriverName
	draAPI       = DRADriverName + "/v1alpha1"
)

// DRADeviceName is the driver's name of the VF at a PCI address in its
// ResourceSlices: the address with ':' and '.' as '-'
// (k8snetworkplumbingwg/dra-driver-sriov
// pkg/devicestate/discovery.go@14490e9d438b).
func DRADeviceName(pci string) string { return strings.NewReplacer(":", "-", ".", "-").Replace(pci) }

// DRAUpstream are the chart's templates the objects follow, and
// kubevirtci's two files around them.
var DRAUpstream = []string{
	draChart + "templates/dra-driver.yaml" + draChartAt,
	draChart + "templates/clusterrole.yaml, clusterrolebinding.yaml, serviceaccount.yaml, deviceclass.yaml" + draChartAt,
	draChart + "templates/sriovnetwork.k8snetworkplumbingwg.io_sriovresourcepolicies.yaml, _deviceattributes.yaml" + draChartAt,
	draChart + "values.yaml" + draChartAt,
	"kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/dra/sriov_dra_default_policy.yaml@39bd4947ba4d",
}

func draObjects(o Options) []runtime.Object {
	// The chart's templateLabels for release sriov-dra (_helpers.tpl).
	podLabels := map[string]string{
		"app.kubernetes.io/name":      "dra-driver-sriov-chart",
		"app.kubernetes.io/instance":  "sriov-dra",
		"app.kubernetes.io/component": "kubeletplugin",
	}
	ns := &corev1.Namespace{TypeMeta: typeNamespace, ObjectMeta: ObjectMeta(DRANamespace, "", nil)}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(draSA, DRANamespace, map[string]string{
		"app.kubernetes.io/name": "dra-driver-sriov-chart", "app.kubernetes.io/instance": "sriov-dra",
	})}
	rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
	}
	role := &rbacv1.ClusterRole{TypeMeta: typeClusterRole, ObjectMeta: ObjectMeta(draRole, "", nil), Rules: []rbacv1.PolicyRule{
		rule("resource.k8s.io", "resourceclaims", "get"),
		rule("resource.k8s.io", "resourceclaims/status", "get", "list", "update", "patch"),
		rule("resource.k8s.io", "resourceclaims/driver", "associated-node:update"),
		rule("", "nodes", "get", "list", "watch"),
		rule("resource.k8s.io", "resourceslices", "get", "list", "watch", "create", "update", "patch", "delete"),
		rule(nadGroup, nadPlural, "get"),
		rule(DRADriverName, "sriovresourcepolicies", "get", "list", "watch"),
		rule(DRADriverName, "deviceattributes", "get", "list", "watch"),
	}}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeClusterRoleBinding,
		ObjectMeta: ObjectMeta(draFullname+"-role-binding", "", nil),
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: draSA, Namespace: DRANamespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: draRole},
	}
	class := &resourcev1.DeviceClass{
		TypeMeta:   typeDeviceClass,
		ObjectMeta: ObjectMeta(DRADeviceClass, "", nil),
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == '" + DRADriverName + "'"},
		}}},
	}
	return []runtime.Object{ns, draPolicyCRDObject(), draAttributesCRDObject(), sa, role, binding, class, draDaemonSetObject(o, podLabels), draDefaultPolicy()}
}

func draDaemonSetObject(o Options, podLabels map[string]string) *appsv1.DaemonSet {
	env := func(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }
	// The driver's CDI specs, NRI socket and pod netns are /var/run paths
	// in the chart, and containerd's on a k3d node are too: k3d mounts
	// /run and /var/run as two tmpfs, so each must stay /var/run.
	return &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(draDaemonSet, DRANamespace, podLabels),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(podLabels),
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					HostNetwork:                   true,
					HostPID:                       true,
					PriorityClassName:             "system-node-critical",
					ServiceAccountName:            draSA,
					SecurityContext:               &corev1.PodSecurityContext{},
					NodeSelector:                  map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
					Tolerations:                   tolerateAll(),
					InitContainers: []corev1.Container{{
						Name:            "sriov-cni",
						Image:           o.image(SRIOVCNIImage),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"--no-sleep"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi"),
						}},
						SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "cni-bin", MountPath: "/host/opt/cni/bin"},
							{Name: "os-release", MountPath: "/host/etc/os-release", ReadOnly: true},
						},
					}},
					Containers: []corev1.Container{{
						Name:            "plugin",
						Image:           o.image(DRADriverImage),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"/usr/bin/dra-driver-sriov"},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						Env: []corev1.EnvVar{
							env("CDI_ROOT", "/var/run/cdi"),
							env("KUBELET_REGISTRAR_DIRECTORY_PATH", "/var/lib/kubelet/plugins_registry"),
							env("KUBELET_PLUGINS_DIRECTORY_PATH", "/var/lib/kubelet/plugins"),
							env("NRI_PLUGIN_NAME", "dra-driver-sriov"),
							env("NRI_PLUGIN_IDX", "42"),
							env("DEFAULT_INTERFACE_PREFIX", "vfnet"),
							env("CONFIGURATION_MODE", "STANDALONE"),
							env("ENABLE_DEVICE_METADATA", "true"),
							nodeNameEnv("NODE_NAME"),
							fieldEnv("NAMESPACE", "metadata.namespace"),
							env("V", "3"),
							env("LOG_FORMAT", "text"),
							env("ALSOLOGTOSTDERR", "true"),
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "plugins-registry", MountPath: "/var/lib/kubelet/plugins_registry"},
							{Name: "plugins", MountPath: "/var/lib/kubelet/plugins"},
							{Name: "cdi", MountPath: "/var/run/cdi"},
							{Name: "cri-socket", MountPath: "/var/run/nri/nri.sock"},
							{Name: "netns", MountPath: "/var/run/netns", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
							{Name: "cni-results", MountPath: "/var/lib/cni/"},
							{Name: "cni-bin", MountPath: "/opt/cni/bin"},
						},
					}},
					Volumes: []corev1.Volume{
						HostPathVolume("cni-results", "/var/lib/cni/", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("netns", "/var/run/netns", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("cri-socket", "/var/run/nri/nri.sock", corev1.HostPathSocket),
						HostPathVolume("plugins-registry", "/var/lib/kubelet/plugins_registry", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("plugins", "/var/lib/kubelet/plugins", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("cdi", "/var/run/cdi", corev1.HostPathDirectoryOrCreate),
						// The driver runs its NAD's plugins with libcni from
						// /opt/cni/bin alone (pkg/cni/cni.go@14490e9d438b), so
						// that is the node's CNI bin dir here whatever the
						// lane's is; the lane's own is the same with
						// --flannel-backend=none.
						HostPathVolume("cni-bin", DefaultCNIBinDir, corev1.HostPathDirectoryOrCreate),
						HostPathVolume("os-release", "/etc/os-release", corev1.HostPathFile),
					},
				},
			},
		},
	}
}

// draDefaultPolicy advertises every VF the driver discovers: a policy
// with one empty config, no filters and no node selector, matches every
// device on every node (pkg/controller/resourcepolicycontroller.go@14490e9d438b).
// Without a matching policy the driver publishes nothing.
func draDefaultPolicy() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": draAPI,
		"kind":       "SriovResourcePolicy",
		"metadata": map[string]any{
			"name":      DRAPolicy,
			"namespace": DRANamespace,
			"labels":    map[string]any{managedByLabel: ManagedByLabelValue},
		},
		"spec": map[string]any{"configs": []any{map[string]any{}}},
	}}
}
