package smoke

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// testOptions are the smoke objects' options of the lane's default config
// (kubevirt.io/sriov_net, sriov_capable=true, vfio-pci) with one PF.
func testOptions() cni.Options {
	l := config.Default()
	key, val := l.NodeLabelKV()
	return cni.Options{VFDriver: l.VFDriver, ResourcePrefix: l.ResourcePrefix, ResourceName: l.ResourceName,
		NodeSelectorKey: key, NodeSelectorValue: val, PFNames: []string{"ens1f0"}}
}

// The smoke pod asks for one VF of the lane's resource, and its image goes
// through the mirror as every other image of the lane does.
func TestObjectsMirrorAndVF(t *testing.T) {
	o := testOptions()
	o.ImageRegistryMirror = "mirror.example:5000"
	objs, err := Objects(o)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	for _, u := range objs {
		if u.GetKind() == "Pod" && u.GetName() == PodName {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	if q := pod.Spec.Containers[0].Resources.Limits["kubevirt.io/sriov_net"]; q.Value() != 1 {
		t.Errorf("smoke pod VF request: %v", pod.Spec.Containers[0].Resources)
	}
	if img := pod.Spec.Containers[0].Image; img != "mirror.example:5000/library/busybox:1.37.0" {
		t.Errorf("smoke pod image %q not rewritten through the mirror", img)
	}
}
