package cni

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ObjectMeta is metav1.ObjectMeta with the lane's managed-by label, so a human (or
// `down`) can tell which objects the lane owns.
func ObjectMeta(name, namespace string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{managedByLabel: ManagedByLabelValue}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: l}
}

// HostPathVolume is a volume of the host's path, of type typ.
func HostPathVolume(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(typ)},
	}}
}

func configMapVolume(name, configMap string, items ...corev1.KeyToPath) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
			Items:                items,
		},
	}}
}

// tolerateAll lets node agents run on every node, tainted or not, and
// from the moment the Node exists: a node is tainted
// node.kubernetes.io/not-ready:NoSchedule until it is Ready, and the
// DaemonSet controller adds no toleration of that one (k8s.io/kubernetes
// pkg/controller/daemon/util/daemonset_util.go@v1.36.3
// AddOrUpdateDaemonPodTolerations).
func tolerateAll() []corev1.Toleration {
	return []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

func nodeNameEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
	}}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: path},
	}}
}

var (
	typeNamespace          = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	typeServiceAccount     = metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}
	typeConfigMap          = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	typePod                = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	typeDaemonSet          = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
	typeClusterRole        = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	typeClusterRoleBinding = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}
	typeDeviceClass        = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"}
)

// selectorOn selects the pods of a template labelled podLabels by the one
// label key upstream's manifest selects them by ("name" for Multus,
// sriov-cni and the device plugin, "app" for Flannel and the injector).
func selectorOn(podLabels map[string]string, key string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{key: podLabels[key]}}
}

func podMeta(labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: labels}
}
