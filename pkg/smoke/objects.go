package smoke

import (
	"encoding/json"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
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
	out := make([]*unstructured.Unstructured, 0, len(typed))
	for _, t := range typed {
		u, err := cni.ToUnstructured(t)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
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
	one := resource.MustParse("1")
	res := corev1.ResourceName(o.Resource())
	pod := &corev1.Pod{
		TypeMeta: typeMeta,
		ObjectMeta: func() metav1.ObjectMeta {
			m := cni.ObjectMeta(PodName, o.SmokeNamespace, map[string]string{"app": "sriov-lane-smoke"})
			m.Annotations = map[string]string{nadv1.NetworkAttachmentAnnot: NetworkName}
			return m
		}(),
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{o.NodeSelectorKey: o.NodeSelectorValue},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:    Container,
				Image:   cni.MirrorImage(o.ImageRegistryMirror, cni.SmokeImage),
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{res: one},
					Limits:   corev1.ResourceList{res: one},
				},
			}},
		},
	}
	return []runtime.Object{nad, pod}, nil
}
