package cni

import (
	"encoding/json"
	"fmt"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

const (
	flannelNamespace = "kube-flannel"
	flannelName      = "flannel"
	flannelConfigMap = "kube-flannel-cfg"
	flannelDaemonSet = "kube-flannel-ds"
	// k3sBinMount is where the node's /bin is seen by the plugin copier.
	k3sBinMount = "/host/bin"
	// flannelHealthzPort serves /healthz and /readyz; flanneld's default
	// (0) disables them (flannel-io/flannel main.go@v0.28.9).
	flannelHealthzPort = 8081
	// Multus (multusConfigFile "auto") wraps the alphabetically first
	// config in its autoconfig dir as the default network: this one.
	flannelConflist = "10-flannel.conflist"
	// flannelConfDir is the node dir flannel's conflist is written to:
	// Multus's autoconfig dir, which containerd does not read. In the CNI
	// conf dir it would turn the node Ready (containerd loads any config)
	// before flanneld has written subnet.env, and the first pods on the
	// pod network (CoreDNS, local-path) would fail their sandbox and wait
	// out kubelet's ~10 s retry on every up. Multus writes its config into
	// the CNI conf dir only once subnet.env exists (multusObjects).
	flannelConfDir = "/etc/cni/flannel.d"
	// flannelSubnetEnv is where flanneld writes the subnet it leased for
	// the node (flannel-io/flannel main.go@v0.28.9, subnetFile).
	flannelSubnetEnv = "/run/flannel/subnet.env"
)

// flannel's CNI conflist and net-conf, as typed values so the plan is
// produced by json.Marshal rather than hand-written text.
type cniConflist struct {
	Name       string `json:"name"`
	CNIVersion string `json:"cniVersion"`
	Plugins    []any  `json:"plugins"`
}

type flannelPluginConf struct {
	Type     string         `json:"type"`
	Delegate map[string]any `json:"delegate"`
}

type portmapPluginConf struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// flannelNetConf is flannel's net-conf.json. EnableIPv4 defaults to true
// in flannel, so it is written only to turn IPv4 off; EnableIPv6 with
// IPv6Network adds the IPv6 pod network (flannel-io/flannel
// pkg/subnet/config.go@v0.28.9, Config and ParseConfig).
type flannelNetConf struct {
	EnableIPv4     *bool          `json:"EnableIPv4,omitempty"`
	Network        string         `json:"Network,omitempty"`
	EnableIPv6     bool           `json:"EnableIPv6,omitempty"`
	IPv6Network    string         `json:"IPv6Network,omitempty"`
	EnableNFTables bool           `json:"EnableNFTables"`
	Backend        map[string]any `json:"Backend"`
}

// flannelNetConfFor maps the IP family to flannel's settings.
func flannelNetConfFor(o Options) flannelNetConf {
	nc := flannelNetConf{Network: o.networks.PodV4, Backend: map[string]any{"Type": "vxlan"}}
	switch o.IPFamily {
	case config.IPFamilyDual:
		nc.EnableIPv6, nc.IPv6Network = true, o.networks.PodV6
	case config.IPFamilyIPv6:
		nc.EnableIPv4 = ptr.To(false)
		nc.EnableIPv6, nc.IPv6Network = true, o.networks.PodV6
	}
	return nc
}

func flannelObjects(o Options) ([]runtime.Object, error) {
	conflist, err := json.MarshalIndent(cniConflist{
		Name:       "cbr0",
		CNIVersion: "0.3.1",
		Plugins: []any{
			flannelPluginConf{Type: "flannel", Delegate: map[string]any{"hairpinMode": true, "isDefaultGateway": true}},
			portmapPluginConf{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding flannel conflist: %w", err)
	}
	netConf, err := json.MarshalIndent(flannelNetConfFor(o), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding flannel net-conf: %w", err)
	}
	// As upstream: k8s-app on every object, tier and app on the ConfigMap
	// and the DaemonSet, whose pods carry tier and app and are selected by
	// app.
	k8sApp := map[string]string{"k8s-app": "flannel"}
	labels := map[string]string{"tier": "node", "app": "flannel", "k8s-app": "flannel"}
	podLabels := map[string]string{"tier": "node", "app": "flannel"}
	ns := &corev1.Namespace{TypeMeta: typeNamespace, ObjectMeta: ObjectMeta(flannelNamespace, "", map[string]string{
		"k8s-app": "flannel",
		// flanneld needs NET_ADMIN and host paths.
		"pod-security.kubernetes.io/enforce": "privileged",
	})}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(flannelName, flannelNamespace, k8sApp)}
	role := &rbacv1.ClusterRole{
		TypeMeta:   typeClusterRole,
		ObjectMeta: ObjectMeta(flannelName, "", k8sApp),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeClusterRoleBinding,
		ObjectMeta: ObjectMeta(flannelName, "", k8sApp),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: flannelName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: flannelName, Namespace: flannelNamespace}},
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   typeConfigMap,
		ObjectMeta: ObjectMeta(flannelConfigMap, flannelNamespace, labels),
		Data:       map[string]string{"cni-conf.json": string(conflist), "net-conf.json": string(netConf)},
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(flannelDaemonSet, flannelNamespace, labels),
		Spec: appsv1.DaemonSetSpec{
			Selector: selectorOn(podLabels, "app"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(podLabels),
				Spec: corev1.PodSpec{
					// kubelet labels every node with its OS
					// (kubernetes.io/os); flanneld is a Linux binary.
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"},
							}}}},
						},
					}},
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					Tolerations:        tolerateAll(),
					ServiceAccountName: flannelName,
					InitContainers: []corev1.Container{
						k3sPluginCopier(o),
						{
							Name:         "install-cni-plugin",
							Image:        o.image(FlannelCNIPluginImage),
							Command:      []string{"cp"},
							Args:         []string{"-f", "/flannel", DefaultCNIBinDir + "/flannel"},
							VolumeMounts: []corev1.VolumeMount{{Name: "cni-plugin", MountPath: DefaultCNIBinDir}},
						},
						{
							// install-conf writes a temp file beside the
							// target and renames it, so Multus never
							// loads a half-written conflist. Upstream's
							// container path; the volume is flannelConfDir.
							Name:    "install-cni",
							Image:   o.image(FlannelImage),
							Command: []string{"/opt/bin/install-conf"},
							Args:    []string{"/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/" + flannelConflist},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "cni", MountPath: "/etc/cni/net.d"},
								{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							},
						},
					},
					Containers: []corev1.Container{{
						Name:    "kube-flannel",
						Image:   o.image(FlannelImage),
						Command: []string{"/opt/bin/flanneld"},
						Args:    []string{"--ip-masq", "--kube-subnet-mgr", fmt.Sprintf("--healthz-port=%d", flannelHealthzPort)},
						Ports: []corev1.ContainerPort{{
							Name: "healthz", ContainerPort: flannelHealthzPort, Protocol: corev1.ProtocolTCP,
						}},
						// /healthz answers while flanneld runs; /readyz only
						// once it has written subnet.env, which the flannel
						// CNI plugin needs before any pod can start.
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
							InitialDelaySeconds: 10,
							PeriodSeconds:       30,
						},
						// Upstream probes after 5 s, then every 10 s; a
						// missed first probe left every lane's up waiting
						// ~10 s for a flanneld that was ready. A local GET
						// every 2 s costs nothing.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("healthz")}},
							PeriodSeconds: 2,
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi"),
						}},
						SecurityContext: &corev1.SecurityContext{
							Privileged:   ptr.To(false),
							Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}},
						},
						Env: []corev1.EnvVar{
							fieldEnv("POD_NAME", "metadata.name"),
							fieldEnv("POD_NAMESPACE", "metadata.namespace"),
							{Name: "EVENT_QUEUE_DEPTH", Value: "5000"},
							// Exit (and be restarted) rather than run on
							// without a synced node cache.
							{Name: "CONT_WHEN_CACHE_NOT_READY", Value: "false"},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "run", MountPath: "/run/flannel"},
							{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []corev1.Volume{
						HostPathVolume("run", "/run/flannel", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("cni-plugin", o.CNIBinDir, corev1.HostPathDirectoryOrCreate),
						HostPathVolume("cni", flannelConfDir, corev1.HostPathDirectoryOrCreate),
						configMapVolume("flannel-cfg", flannelConfigMap),
						HostPathVolume("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
						HostPathVolume("k3s-bin", o.K3sBinDir, corev1.HostPathDirectory),
					},
				},
			},
		},
	}
	return []runtime.Object{ns, sa, role, binding, cm, ds}, nil
}

// k3sPluginCopier makes the standard CNI plugins that flannel's conflist
// chains (bridge, host-local, portmap, ...) available in the node's CNI bin
// dir without a download. k3s ships them as one multi-call binary, /bin/cni,
// with a relative symlink per plugin in /bin (k3s-io/k3s
// scripts/package-cli@v1.35.5+k3s1, read at 6a4781ad; in k3d nodes the
// data archive is unpacked at / (package/Dockerfile@v1.35.5+k3s1), so no
// /var/lib/rancher/k3s/data/current/bin exists), and k3s does not install
// them under --flannel-backend=none (pkg/executor/embed/embed.go@v1.35.5+k3s1
// sets the CNI dirs for embedded flannel only). The node's /bin
// is mounted read-only at a path of its own, where the relative links still
// resolve; cp -L copies the binary under each plugin's name, which it
// dispatches on. One cp with fixed arguments (no shell) fails loudly if a
// plugin is missing. The flannel image provides cp.
func k3sPluginCopier(o Options) corev1.Container {
	args := []string{"-fL"}
	for _, p := range o.CNIPlugins {
		args = append(args, path.Join(k3sBinMount, p))
	}
	args = append(args, DefaultCNIBinDir+"/")
	return corev1.Container{
		Name:    "install-k3s-cni-plugins",
		Image:   o.image(FlannelImage),
		Command: []string{"cp"},
		Args:    args,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "k3s-bin", MountPath: k3sBinMount, ReadOnly: true},
			{Name: "cni-plugin", MountPath: DefaultCNIBinDir},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}
