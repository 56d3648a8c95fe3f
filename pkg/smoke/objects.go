package smoke

import (
	"encoding/json"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Smoke object names (`sriov-lane verify`).
const (
	NetworkName = "sriov-lane-smoke"
	PodName     = "sriov-lane-smoke"
	// Container is the smoke pod's one container, where verify looks.
	Container = "smoke"
	// Subnet is the smoke network's host-local range in netdevice
	// mode; verify expects the VF interface's address in it.
	Subnet = "10.56.217.0/24"
	// ClaimTemplateName is the smoke pod's ResourceClaimTemplate in dra
	// mode, and ClaimName the pod's claim made from it.
	ClaimTemplateName = "sriov-lane-smoke"
	ClaimName         = "vf"
	// DRAInterface is the VF's interface in a dra lane's smoke pod: the
	// driver names the first device of a pod <DEFAULT_INTERFACE_PREFIX>0,
	// the chart's prefix being vfnet
	// (k8snetworkplumbingwg/dra-driver-sriov pkg/devicestate/state.go@14490e9d438b,
	// deployments/helm/dra-driver-sriov/values.yaml@14490e9d438b).
	DRAInterface = "vfnet0"
)

// typeMeta is the smoke pod's TypeMeta, which apply needs to find its resource.
var typeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

type sriovNetConf struct {
	CNIVersion string         `json:"cniVersion"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	IPAM       map[string]any `json:"ipam,omitempty"`
}

// Objects returns a sriov NetworkAttachmentDefinition and a pod that
// requests one VF through it, for an end-to-end check on real hardware.
func Objects(o cni.Options) ([]*unstructured.Unstructured, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("network component options: %w", err)
	}
	typed, err := objects(o)
	if err != nil {
		return nil, err
	}
	return cni.ToUnstructuredList(typed)
}

func objects(o cni.Options) ([]runtime.Object, error) {
	conf := sriovNetConf{CNIVersion: "0.3.1", Name: NetworkName, Type: "sriov"}
	// A vfio-pci VF has no kernel netdev to address; in netdevice mode the
	// VF interface gets an address so the pod can ping through it.
	if o.VFDriver == config.VFDriverNetdevice {
		conf.IPAM = map[string]any{"type": "host-local", "subnet": Subnet}
	}
	cfg, err := json.Marshal(conf)
	if err != nil {
		return nil, fmt.Errorf("encoding smoke network config: %w", err)
	}
	nad := &nadv1.NetworkAttachmentDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: "NetworkAttachmentDefinition"},
		ObjectMeta: func() metav1.ObjectMeta {
			m := cni.ObjectMeta(NetworkName, o.SmokeNamespace, nil)
			m.Annotations = map[string]string{cni.ResourceNameAnnotation: o.Resource()}
			return m
		}(),
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: string(cfg)},
	}
	if o.VFAllocation == config.VFAllocationDRA {
		return draObjects(o, nad)
	}
	one := resource.MustParse("1")
	res := corev1.ResourceName(o.Resource())
	pod := newPod(o, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{res: one},
		Limits:   corev1.ResourceList{res: one},
	})
	pod.Annotations = map[string]string{nadv1.NetworkAttachmentAnnot: NetworkName}
	return []runtime.Object{nad, pod}, nil
}

// draObjects are a dra lane's smoke objects: the NAD (the driver, in its
// STANDALONE mode, reads the one the claim's config names for every
// device it prepares and runs its plugin itself, so the NAD has no
// resourceName annotation and the pod no Multus network), a
// ResourceClaimTemplate asking for one device of the driver's class with
// a VfConfig naming the NAD (and, in vfio-pci mode, driver vfio-pci, the
// one setting that makes the driver hand the pod /dev/vfio/<group>:
// pkg/devicestate/state.go@14490e9d438b applyConfigOnDevice), and the pod
// taking a claim from it.
func draObjects(o cni.Options, nad *nadv1.NetworkAttachmentDefinition) ([]runtime.Object, error) {
	nad.Annotations = nil
	vfc := map[string]string{
		"apiVersion":       cni.DRADriverName + "/v1alpha1",
		"kind":             "VfConfig",
		"netAttachDefName": NetworkName,
	}
	if o.VFDriver == config.VFDriverVFIO {
		vfc["driver"] = config.VFDriverVFIO
	}
	params, err := json.Marshal(vfc)
	if err != nil {
		return nil, fmt.Errorf("encoding smoke VfConfig: %w", err)
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: cni.ObjectMeta(ClaimTemplateName, o.SmokeNamespace, nil),
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "vf", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: cni.DRADeviceClass}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"vf"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: cni.DRADriverName, Parameters: runtime.RawExtension{Raw: params}},
			}}},
		}}},
	}
	pod := newPod(o, corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: ClaimName}}})
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: ClaimName, ResourceClaimTemplateName: ptr.To(ClaimTemplateName)}}
	return []runtime.Object{nad, tmpl, pod}, nil
}

// newPod is the smoke pod both modes run on o's node: one container that
// sleeps, asking for the VF through res.
func newPod(o cni.Options, res corev1.ResourceRequirements) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   typeMeta,
		ObjectMeta: cni.ObjectMeta(PodName, o.SmokeNamespace, map[string]string{"app": "sriov-lane-smoke"}),
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:      Container,
				Image:     cni.MirrorImage(o.ImageRegistryMirror, cni.SmokeImage),
				Command:   []string{"sleep", "3600"},
				Resources: res,
			}},
		},
	}
}
