package cni

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

const (
	multusName        = "multus"
	multusDaemonSet   = "kube-multus-ds"
	multusConfigMap   = "multus-daemon-config"
	multusNamespace   = "kube-system"
	multusHostCNIConf = "/host/etc/cni/net.d"
	multusHostCNIBin  = "/host/opt/cni/bin"
	// multusHostPrefix is where the daemon sees the node's paths it
	// mounts one by one (/run, the CNI dirs).
	multusHostPrefix = "/host"
	// multusConfDir is where Multus looks for delegate configs named by
	// a NetworkAttachmentDefinition without a spec.config.
	multusConfDir = "/etc/cni/multus/net.d"
)

// multusDaemonConfig is the thick daemon's daemon-config.json. Paths are as
// seen inside the Multus container, where the node's CNI dirs are mounted
// under /host and the node's root under /hostroot.
type multusDaemonConfig struct {
	ChrootDir           string `json:"chrootDir"`
	CNIVersion          string `json:"cniVersion"`
	LogLevel            string `json:"logLevel"`
	LogToStderr         bool   `json:"logToStderr"`
	CNIConfigDir        string `json:"cniConfigDir"`
	MultusAutoconfigDir string `json:"multusAutoconfigDir"`
	MultusConfigFile    string `json:"multusConfigFile"`
	SocketDir           string `json:"socketDir"`
	// ReadinessIndicatorFile, when set, is waited for (up to 45 s, then
	// the daemon exits and is restarted) before the daemon writes its
	// config (k8snetworkplumbingwg/multus-cni cmd/multus-daemon/main.go and
	// pkg/types/conf.go GetReadinessIndicatorFile@v4.3.0).
	ReadinessIndicatorFile string `json:"readinessindicatorfile,omitempty"`
}

func multusObjects(o Options) ([]runtime.Object, error) {
	memLimit, err := resource.ParseQuantity(o.MultusMemoryLimit)
	if err != nil {
		return nil, fmt.Errorf("multus memory limit %q: %w", o.MultusMemoryLimit, err)
	}
	dc := multusDaemonConfig{
		ChrootDir:           "/hostroot",
		CNIVersion:          "0.3.1",
		LogLevel:            "verbose",
		LogToStderr:         true,
		CNIConfigDir:        multusHostCNIConf,
		MultusAutoconfigDir: multusHostCNIConf,
		// auto: Multus wraps the first conflist it finds (flannel's or
		// calico's) as the cluster default network.
		MultusConfigFile: "auto",
		SocketDir:        "/host/run/multus/",
	}
	var confVols []corev1.Volume
	var confMounts []corev1.VolumeMount
	if o.CNI == config.CNIFlannel {
		// Flannel's conflist is in a dir of its own, and Multus's config,
		// the only one containerd loads, comes once flanneld has leased
		// the node's subnet: a node turns Ready only when a pod can get
		// its default network (flannelConfDir). Calico's operator writes
		// its conflist into the CNI conf dir itself.
		dc.MultusAutoconfigDir = multusHostPrefix + flannelConfDir
		dc.ReadinessIndicatorFile = multusHostPrefix + flannelSubnetEnv
		confVols = []corev1.Volume{HostPathVolume("flannel-conf", flannelConfDir, corev1.HostPathDirectoryOrCreate)}
		confMounts = []corev1.VolumeMount{{Name: "flannel-conf", MountPath: multusHostPrefix + flannelConfDir, ReadOnly: true}}
	}
	cfg, err := json.MarshalIndent(dc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding multus daemon config: %w", err)
	}
	// As upstream: the DaemonSet and its pods carry tier, app and name and
	// are selected by name; the ConfigMap carries tier and app.
	labels := map[string]string{"tier": "node", "app": "multus", "name": "multus"}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(multusName, multusNamespace, nil)}
	role := &rbacv1.ClusterRole{
		TypeMeta:   typeClusterRole,
		ObjectMeta: ObjectMeta(multusName, "", nil),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "list", "update", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeClusterRoleBinding,
		ObjectMeta: ObjectMeta(multusName, "", nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: multusName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: multusName, Namespace: multusNamespace}},
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   typeConfigMap,
		ObjectMeta: ObjectMeta(multusConfigMap, multusNamespace, map[string]string{"tier": "node", "app": "multus"}),
		Data:       map[string]string{"daemon-config.json": string(cfg)},
	}
	hostToContainer := corev1.MountPropagationHostToContainer
	bidir := corev1.MountPropagationBidirectional
	// Upstream limits the daemon to 50Mi, which is OOM-killed in practice
	// (k8snetworkplumbingwg/multus-cni#1346, #1349).
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: memLimit},
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(multusDaemonSet, multusNamespace, labels),
		Spec: appsv1.DaemonSetSpec{
			Selector:       selectorOn(labels, "name"),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(labels),
				Spec: corev1.PodSpec{
					HostNetwork: true,
					HostPID:     true,
					// Upstream's: every NoSchedule and NoExecute taint, so
					// the daemon runs on tainted and not yet Ready nodes.
					Tolerations: []corev1.Toleration{
						{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
					},
					ServiceAccountName: multusName,
					PriorityClassName:  "system-node-critical",
					InitContainers: []corev1.Container{{
						Name:            "install-multus-binary",
						Image:           o.image(MultusImage),
						Command:         []string{"/usr/src/multus-cni/bin/install_multus", "-d", multusHostCNIBin, "-t", "thick"},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("15Mi"),
						}},
						VolumeMounts:             []corev1.VolumeMount{{Name: "cnibin", MountPath: multusHostCNIBin, MountPropagation: ptr.To(bidir)}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
					Containers: []corev1.Container{{
						Name:                     "kube-multus",
						Image:                    o.image(MultusImage),
						Command:                  []string{"/usr/src/multus-cni/bin/multus-daemon"},
						Resources:                res,
						SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						Env:                      []corev1.EnvVar{nodeNameEnv("MULTUS_NODE_NAME")},
						VolumeMounts: append([]corev1.VolumeMount{
							{Name: "cni", MountPath: multusHostCNIConf},
							// The daemon looks delegate plugins up in its
							// own filesystem first, so the bin dir must sit
							// where it sits on the node.
							{Name: "cnibin", MountPath: DefaultCNIBinDir},
							{Name: "host-run", MountPath: "/host/run"},
							{Name: "host-var-lib-cni-multus", MountPath: "/var/lib/cni/multus"},
							{Name: "host-var-lib-kubelet", MountPath: "/var/lib/kubelet", MountPropagation: ptr.To(hostToContainer)},
							{Name: "host-run-k8s-cni-cncf-io", MountPath: "/run/k8s.cni.cncf.io"},
							{Name: "host-run-netns", MountPath: "/run/netns", MountPropagation: ptr.To(hostToContainer)},
							{Name: "multus-daemon-config", MountPath: "/etc/cni/net.d/multus.d", ReadOnly: true},
							{Name: "hostroot", MountPath: "/hostroot", MountPropagation: ptr.To(hostToContainer)},
							{Name: "multus-conf-dir", MountPath: multusConfDir},
						}, confMounts...),
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Volumes: append([]corev1.Volume{
						HostPathVolume("cni", o.CNIConfDir, corev1.HostPathDirectoryOrCreate),
						HostPathVolume("cnibin", o.CNIBinDir, corev1.HostPathDirectoryOrCreate),
						// The socket dir: the shim, run by the node's
						// containerd, dials /run/multus/multus.sock.
						HostPathVolume("host-run", "/run", corev1.HostPathDirectory),
						HostPathVolume("host-var-lib-cni-multus", "/var/lib/cni/multus", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("host-var-lib-kubelet", "/var/lib/kubelet", corev1.HostPathDirectory),
						// k3d mounts /run and /var/run as two tmpfs
						// (k3d-io/k3d pkg/types/defaults.go@v5.9.0):
						// containerd opens pod netns and the device plugin
						// writes device info under /var/run, so these two
						// name /var/run where upstream (whose image links
						// /var/run to /run) names /run. Inside the debian
						// based Multus image /var/run is /run, so the mount
						// points keep upstream's paths.
						HostPathVolume("host-run-k8s-cni-cncf-io", "/var/run/k8s.cni.cncf.io", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("host-run-netns", "/var/run/netns", corev1.HostPathDirectoryOrCreate),
						configMapVolume("multus-daemon-config", multusConfigMap, corev1.KeyToPath{Key: "daemon-config.json", Path: "daemon-config.json"}),
						HostPathVolume("hostroot", "/", corev1.HostPathDirectory),
						HostPathVolume("multus-conf-dir", multusConfDir, corev1.HostPathDirectoryOrCreate),
					}, confVols...),
				},
			},
		},
	}
	return []runtime.Object{nadCRD(), sa, role, binding, cm, ds}, nil
}
