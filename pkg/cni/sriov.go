package cni

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/config"
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
					Volumes: []corev1.Volume{HostPathVolume("cnibin", o.CNIBinDir, corev1.HostPathDirectoryOrCreate)},
				},
			},
		},
	}
	return []runtime.Object{ds}
}

// devicePluginObjects is the lane's device plugin: one pool of the VFs of
// its PFs on every SR-IOV agent. Its ConfigMap lives in the plugin's own
// namespace because a pod can only mount ConfigMaps from there.
func devicePluginObjects(o Options) ([]runtime.Object, error) {
	return DevicePlugin{
		Namespace:      o.Namespace,
		DaemonSet:      devicePluginDaemonSet,
		ConfigMap:      DevicePluginConfigMap,
		ServiceAccount: devicePluginSA,
		PodName:        "sriov-device-plugin",
		Image:          o.image(DevicePluginImage),
		ResourcePrefix: o.ResourcePrefix,
		Configs:        map[string]DPConfig{DevicePluginConfigKey: devicePluginConfig(o)},
		ConfigFile:     DevicePluginConfigKey,
		NodeSelector:   map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
	}.Objects()
}

// DevicePlugin is one deployment of the SR-IOV network device plugin: the
// lane's (the VFs of its PFs) or a fleet's (whole PFs, a config per host).
type DevicePlugin struct {
	Namespace, DaemonSet, ConfigMap, ServiceAccount string
	// PodName is the pods' name label, which the DaemonSet selects them by.
	PodName string
	Image   string
	// ResourcePrefix is the plugin's --resource-prefix.
	ResourcePrefix string
	// Configs are the ConfigMap's files under /etc/pcidp, by name.
	Configs map[string]DPConfig
	// ConfigFile is the one the plugin reads: a name of Configs, or
	// $(NODE_NAME) for one file per node, which the kubelet expands in
	// the container's arguments from the NODE_NAME variable.
	ConfigFile string
	// NodeSelector, or else Nodes (by name), is where the plugin runs.
	NodeSelector map[string]string
	Nodes        []string
}

// nodeNameVar is the variable a DevicePlugin's ConfigFile may name.
const nodeNameVar = "NODE_NAME"

// Objects are the plugin's ServiceAccount, its ConfigMap (from the typed
// DPConfigs) and its DaemonSet.
func (d DevicePlugin) Objects() ([]runtime.Object, error) {
	data := map[string]string{}
	var items []corev1.KeyToPath
	for _, name := range slices.Sorted(maps.Keys(d.Configs)) {
		conf, err := d.Configs[name].Marshal()
		if err != nil {
			return nil, err
		}
		data[name] = conf
		items = append(items, corev1.KeyToPath{Key: name, Path: name})
	}
	// As upstream: tier and app on the DaemonSet, name too on its pods,
	// which it selects by name.
	labels := map[string]string{"tier": "node", "app": "sriovdp"}
	podLabels := map[string]string{"tier": "node", "app": "sriovdp", "name": d.PodName}
	cm := &corev1.ConfigMap{
		TypeMeta:   typeConfigMap,
		ObjectMeta: ObjectMeta(d.ConfigMap, d.Namespace, nil),
		Data:       data,
	}
	sa := &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: ObjectMeta(d.ServiceAccount, d.Namespace, nil)}
	var env []corev1.EnvVar
	if strings.Contains(d.ConfigFile, "$("+nodeNameVar+")") {
		env = []corev1.EnvVar{nodeNameEnv(nodeNameVar)}
	}
	// One term a node, the terms OR'ed: a metadata.name requirement takes
	// one value (k8s.io/kubernetes pkg/apis/core/validation/validation.go@v1.36.3
	// ValidateNodeFieldSelectorRequirement; the API server refused the list on the rig).
	var affinity *corev1.Affinity
	if len(d.Nodes) > 0 {
		var terms []corev1.NodeSelectorTerm
		for _, n := range d.Nodes {
			terms = append(terms, corev1.NodeSelectorTerm{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}},
			})
		}
		affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: ObjectMeta(d.DaemonSet, d.Namespace, labels),
		Spec: appsv1.DaemonSetSpec{
			Selector: selectorOn(podLabels, "name"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(podLabels),
				Spec: corev1.PodSpec{
					HostNetwork:  true,
					NodeSelector: d.NodeSelector,
					Affinity:     affinity,
					// Upstream tolerates no taint, and so would start the
					// plugin only once the agent is Ready, in series on
					// up's way to allocatable.
					Tolerations:        tolerateAll(),
					ServiceAccountName: d.ServiceAccount,
					Containers: []corev1.Container{{
						Name:            "kube-sriovdp",
						Image:           d.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						// Options of the image's entrypoint, which passes
						// them on to sriovdp as glog and plugin flags
						// (images/entrypoint.sh@v3.11.0); "=" is required.
						Args: []string{
							"--log-dir=sriovdp",
							"--log-level=10",
							"--resource-prefix=" + d.ResourcePrefix,
							"--config-file=/etc/pcidp/" + d.ConfigFile,
						},
						Env:             env,
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
						HostPathVolume("devicesock", "/var/lib/kubelet/device-plugins", corev1.HostPathDirectory),
						HostPathVolume("plugins-registry", "/var/lib/kubelet/plugins_registry", corev1.HostPathDirectoryOrCreate),
						HostPathVolume("log", "/var/log", corev1.HostPathDirectory),
						configMapVolume("config-volume", d.ConfigMap, items...),
						HostPathVolume("device-info", "/var/run/k8s.cni.cncf.io/devinfo/dp", corev1.HostPathDirectoryOrCreate),
					},
				},
			},
		},
	}
	return []runtime.Object{sa, cm, ds}, nil
}

// RestartDevicePlugins restarts what offers the VFs on each of nodes: the
// device plugin, or with allocation dra the driver's kubelet plugin. Both
// find their devices once, at start (k8snetworkplumbingwg/sriov-network-device-plugin
// cmd/sriovdp/main.go@v3.11.0: discoverHostDevices, initServers,
// startAllServers, then it only waits for a signal;
// k8snetworkplumbingwg/dra-driver-sriov pkg/devicestate/state.go@14490e9d438b:
// NewManager calls DiscoverSriovDevices once), so after a repair puts a
// restarted agent's VFs back, a plugin that started before that offers
// none of them until it starts again. Its DaemonSet starts the deleted
// pods again. The device plugin's restart returns once the Node's
// allocatable says what the kubelet admits there (waitPluginsRestarted);
// the driver's, once its pods are Ready: its ResourceSlices are waited
// for by WaitDRASlices.
func RestartDevicePlugins(ctx context.Context, cs kubernetes.Interface, allocation string, nodes []string) error {
	if len(nodes) == 0 {
		return nil
	}
	ns, name, settle := DefaultNamespace, devicePluginDaemonSet, KubeletStatusSettle
	if allocation == config.VFAllocationDRA {
		ns, name, settle = DRANamespace, draDaemonSet, 0
	}
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("restarting %s: %w", name, err)
	}
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	deleted := map[string][]types.UID{}
	for _, n := range nodes {
		if deleted[n], err = deletePluginPods(ctx, cs, ns, sel, n); err != nil {
			return err
		}
	}
	return waitPluginsRestarted(ctx, cs, ns, sel, deleted, settle)
}

// deletePluginPods deletes the pods of selector sel on node and returns
// their UIDs.
func deletePluginPods(ctx context.Context, cs kubernetes.Interface, ns, sel, node string) ([]types.UID, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: sel,
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return nil, fmt.Errorf("restarting the device plugin on %s: %w", node, err)
	}
	var deleted []types.UID
	for _, p := range pods.Items {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("restarting the device plugin on %s: deleting pod %s: %w", node, p.Name, err)
		}
		deleted = append(deleted, p.UID)
	}
	return deleted, nil
}

// KubeletStatusSettle is how long after a new device plugin pod is Ready
// the API's Node can still show what the kubelet no longer admits. A
// plugin that goes away has its devices marked unhealthy, and a pod asking
// for them is refused (kubernetes/kubernetes
// pkg/kubelet/cm/devicemanager/manager.go@v1.36.3: PluginDisconnected,
// markResourceUnhealthy, devicesToAllocate); a restarted kubelet starts with
// none healthy (readCheckpoint). It posts Node status only at its sync,
// every nodeStatusUpdateFrequency (10 s by default,
// pkg/kubelet/apis/config/v1beta1/defaults.go@v1.36.3), and only when the
// status changed (pkg/kubelet/kubelet_node_status.go@v1.36.3,
// tryUpdateNodeStatus). So until one sync after the new plugin registered
// (it registers as it starts, sriovdp main.go@v3.11.0), the allocatable
// the API shows may be the count from before the restart. One sync plus
// 2 s for the plugin's registration and the post; a kubelet with a longer
// nodeStatusUpdateFrequency needs more.
const KubeletStatusSettle = 12 * time.Second

// waitPluginsRestarted waits until each node of deleted runs a pod of
// selector sel that is Ready, not terminating and none of the pods deleted
// there (deletePluginPods' UIDs), then until settle has passed since the
// last of them became Ready (KubeletStatusSettle for the device plugin:
// only then does the Node's allocatable say what the kubelet admits).
func waitPluginsRestarted(ctx context.Context, cs kubernetes.Interface, ns, sel string, deleted map[string][]types.UID, settle time.Duration) error {
	lw := podsLW(cs, ns, metav1.ListOptions{LabelSelector: sel})
	nodes := slices.Sorted(maps.Keys(deleted))
	var pending []string
	var lastReady time.Time
	err := watchUntil(ctx, lw, &corev1.Pod{}, func(objs []any) (bool, error) {
		readyAt := map[string]time.Time{}
		for _, o := range objs {
			p := o.(*corev1.Pod)
			if p.DeletionTimestamp != nil || slices.Contains(deleted[p.Spec.NodeName], p.UID) || !PodReady(p) {
				continue
			}
			readyAt[p.Spec.NodeName] = podReadySince(p)
		}
		pending, lastReady = pending[:0], time.Time{}
		for _, n := range nodes {
			t, ok := readyAt[n]
			if !ok {
				pending = append(pending, n)
			} else if t.After(lastReady) {
				lastReady = t
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the restarted device plugin on %s: %w", strings.Join(pending, ", "), err)
	}
	settled, cancel := context.WithDeadline(ctx, lastReady.Add(settle))
	defer cancel()
	<-settled.Done()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting %s after the restarted device plugin became Ready, for the kubelet's Node status: %w", settle, err)
	}
	return nil
}

// podReadySince is when p's Ready condition last turned true.
func podReadySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
