package cni

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	sriovCNIDaemonSet     = "kube-sriov-cni-ds"
	devicePluginDaemonSet = "kube-sriov-device-plugin"
	devicePluginSA        = "sriov-device-plugin"
)

func resources(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(reqCPU), corev1.ResourceMemory: resource.MustParse(reqMem)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limCPU), corev1.ResourceMemory: resource.MustParse(limMem)},
	}
}

// sriovCNIObjects is the DaemonSet whose image copies the sriov CNI binary
// into the node's CNI bin dir and then idles (the image's entrypoint:
// k8snetworkplumbingwg/sriov-cni images/entrypoint.sh@v2.10.0).
func sriovCNIObjects(o Options) []runtime.Object {
	// As upstream: tier and app on the DaemonSet, name too on its pods,
	// which it selects by name.
	labels := map[string]string{"tier": "node", "app": "sriov-cni"}
	podLabels := map[string]string{"tier": "node", "app": "sriov-cni", "name": "sriov-cni"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(sriovCNIDaemonSet, o.Namespace, labels),
		Spec: appsv1.DaemonSetSpec{
			Selector: selectorOn(podLabels, "name"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(podLabels),
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
					// Upstream tolerates control-plane taints only, and so
					// would start only once the agent is Ready.
					Tolerations: tolerateAll(),
					// Unlike upstream's: copying a binary needs no pod
					// network, and waiting for one (Flannel's subnet.env)
					// cost every up a failed sandbox and a ~10 s retry.
					HostNetwork: true,
					Containers: []corev1.Container{{
						Name:            "kube-sriov-cni",
						Image:           o.image(SRIOVCNIImage),
						ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Privileged:               ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Resources:    resources("100m", "50Mi", "100m", "50Mi"),
						VolumeMounts: []corev1.VolumeMount{{Name: "cnibin", MountPath: "/host/opt/cni/bin"}},
					}},
					Volumes: []corev1.Volume{hostPathVolume("cnibin", o.CNIBinDir, corev1.HostPathDirectoryOrCreate)},
				},
			},
		},
	}
	return []runtime.Object{ds}
}

// devicePluginObjects is the plugin's ConfigMap (from the typed DPConfig),
// its ServiceAccount and its DaemonSet. The ConfigMap lives in the plugin's
// own namespace because a pod can only mount ConfigMaps from there.
func devicePluginObjects(o Options) ([]runtime.Object, error) {
	conf, err := devicePluginConfig(o).Marshal()
	if err != nil {
		return nil, err
	}
	// As upstream: tier and app on the DaemonSet, name too on its pods,
	// which it selects by name.
	labels := map[string]string{"tier": "node", "app": "sriovdp"}
	podLabels := map[string]string{"tier": "node", "app": "sriovdp", "name": "sriov-device-plugin"}
	cm := &corev1.ConfigMap{
		TypeMeta:   typeConfigMap,
		ObjectMeta: ObjectMeta(DevicePluginConfigMap, o.Namespace, nil),
		Data:       map[string]string{DevicePluginConfigKey: conf},
	}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(devicePluginSA, o.Namespace, nil)}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(devicePluginDaemonSet, o.Namespace, labels),
		Spec: appsv1.DaemonSetSpec{
			Selector: selectorOn(podLabels, "name"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(podLabels),
				Spec: corev1.PodSpec{
					HostNetwork:  true,
					NodeSelector: map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
					// Upstream tolerates no taint, and so would start the
					// plugin only once the agent is Ready, in series on
					// up's way to allocatable.
					Tolerations:        tolerateAll(),
					ServiceAccountName: devicePluginSA,
					Containers: []corev1.Container{{
						Name:            "kube-sriovdp",
						Image:           o.image(DevicePluginImage),
						ImagePullPolicy: corev1.PullIfNotPresent,
						// Options of the image's entrypoint, which passes
						// them on to sriovdp as glog and plugin flags
						// (images/entrypoint.sh@v3.11.0); "=" is required.
						Args: []string{
							"--log-dir=sriovdp",
							"--log-level=10",
							"--resource-prefix=" + o.ResourcePrefix,
							"--config-file=/etc/pcidp/" + DevicePluginConfigKey,
						},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						Resources:       resources("250m", "40Mi", "1", "200Mi"),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "devicesock", MountPath: "/var/lib/kubelet/device-plugins"},
							{Name: "plugins-registry", MountPath: "/var/lib/kubelet/plugins_registry"},
							{Name: "log", MountPath: "/var/log"},
							{Name: "config-volume", MountPath: "/etc/pcidp", ReadOnly: true},
							{Name: "device-info", MountPath: "/var/run/k8s.cni.cncf.io/devinfo/dp"},
						},
					}},
					Volumes: []corev1.Volume{
						hostPathVolume("devicesock", "/var/lib/kubelet/device-plugins", corev1.HostPathDirectory),
						hostPathVolume("plugins-registry", "/var/lib/kubelet/plugins_registry", corev1.HostPathDirectoryOrCreate),
						hostPathVolume("log", "/var/log", corev1.HostPathDirectory),
						configMapVolume("config-volume", DevicePluginConfigMap, corev1.KeyToPath{Key: DevicePluginConfigKey, Path: DevicePluginConfigKey}),
						hostPathVolume("device-info", "/var/run/k8s.cni.cncf.io/devinfo/dp", corev1.HostPathDirectoryOrCreate),
					},
				},
			},
		},
	}
	return []runtime.Object{sa, cm, ds}, nil
}

// RestartDevicePlugin deletes the device plugin's pods on node, and its
// DaemonSet starts them again. The device plugin finds its devices once,
// at start (k8snetworkplumbingwg/sriov-network-device-plugin
// cmd/sriovdp/main.go@v3.11.0: discoverHostDevices, initServers,
// startAllServers, then it only waits for a signal), so after a repair
// puts a restarted agent's VFs back, a plugin that started before that
// advertises none of them until it starts again.
func RestartDevicePlugin(ctx context.Context, cs kubernetes.Interface, node string) error {
	ds, err := cs.AppsV1().DaemonSets(DefaultNamespace).Get(ctx, devicePluginDaemonSet, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("restarting the device plugin on %s: %w", node, err)
	}
	pods, err := cs.CoreV1().Pods(DefaultNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector),
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return fmt.Errorf("restarting the device plugin on %s: %w", node, err)
	}
	for _, p := range pods.Items {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("restarting the device plugin on %s: deleting pod %s: %w", node, p.Name, err)
		}
	}
	return nil
}
