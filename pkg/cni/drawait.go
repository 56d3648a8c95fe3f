package cni

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Device attributes dra-driver-sriov publishes for each VF
// (pkg/consts/consts.go and pkg/devicestate/discovery.go@14490e9d438b):
// the VF's PCI address and the netdev name of its PF.
const (
	DRAAttrPCIAddress = DRADriverName + "/pciAddress"
	DRAAttrPFName     = DRADriverName + "/PFName"
)

// DRADevice is one device of a node's published pool.
type DRADevice struct {
	Name, PCIAddress, PF string
}

// DRAPool is what the driver publishes for one node: the devices of the
// newest complete generation of its pool, or Incomplete while the slices
// of that generation are not all there.
type DRAPool struct {
	Devices    []DRADevice
	Incomplete bool
}

// PerPF counts the pool's devices by PF ("" for a device without one).
func (p DRAPool) PerPF() map[string]int {
	out := map[string]int{}
	for _, d := range p.Devices {
		out[d.PF]++
	}
	return out
}

// String says how many devices the pool holds, per PF, as status shows it.
func (p DRAPool) String() string {
	s := fmt.Sprintf("%d VFs (%s)", len(p.Devices), perPF(p.PerPF()))
	if p.Incomplete {
		s += ", being replaced"
	}
	return s
}

// draSlices selects the driver's ResourceSlices, and no other driver's.
func draSlices() string { return fields.OneTermEqualSelector("spec.driver", DRADriverName).String() }

// ListDRAPools reads the driver's published pools, one per node.
func ListDRAPools(ctx context.Context, cs kubernetes.Interface) (map[string]DRAPool, error) {
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: draSlices()})
	if err != nil {
		return nil, fmt.Errorf("listing %s ResourceSlices: %w", DRADriverName, err)
	}
	return DRAPools(list.Items), nil
}

func resourceSlicesLW(cs kubernetes.Interface) cache.ListerWatcher {
	sel := draSlices()
	return listWatch(cs, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = sel
		return cs.ResourceV1().ResourceSlices().List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return cs.ResourceV1().ResourceSlices().Watch(ctx, o)
	})
}

// DRAPools reads the driver's slices into one pool per node. The driver
// publishes one pool per node, named for it, through the library's
// ResourceSlice controller, which sets spec.nodeName when the owner is
// the Node (pkg/driver/driver.go@14490e9d438b; kubernetes/dynamic-resource-allocation
// resourceslice/resourceslicecontroller.go@v0.36.1). A pool is a set of
// slices of one generation; while the controller replaces them, slices
// of two generations exist, and only the newest counts, once all
// resourceSliceCount of its slices are there (k8s.io/api
// resource/v1/types.go@v0.37.2 ResourcePool).
func DRAPools(list []resourcev1.ResourceSlice) map[string]DRAPool {
	newest := map[string]int64{}
	for _, s := range list {
		if s.Spec.NodeName == nil {
			continue
		}
		node := *s.Spec.NodeName
		if g, ok := newest[node]; !ok || s.Spec.Pool.Generation > g {
			newest[node] = s.Spec.Pool.Generation
		}
	}
	out := map[string]DRAPool{}
	seen := map[string]int64{}
	for _, s := range list {
		if s.Spec.NodeName == nil || s.Spec.Pool.Generation != newest[*s.Spec.NodeName] {
			continue
		}
		node := *s.Spec.NodeName
		p := out[node]
		seen[node]++
		p.Incomplete = seen[node] != s.Spec.Pool.ResourceSliceCount
		for _, d := range s.Spec.Devices {
			p.Devices = append(p.Devices, DRADevice{Name: d.Name, PCIAddress: stringAttr(d, DRAAttrPCIAddress), PF: stringAttr(d, DRAAttrPFName)})
		}
		out[node] = p
	}
	for _, p := range out {
		slices.SortFunc(p.Devices, func(a, b DRADevice) int { return strings.Compare(a.PCIAddress+a.Name, b.PCIAddress+b.Name) })
	}
	return out
}

func stringAttr(d resourcev1.Device, name string) string {
	if a, ok := d.Attributes[resourcev1.QualifiedName(name)]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// CheckDRAServed says whether the API server serves what DRA mode uses:
// the ResourceSlices, DeviceClasses, ResourceClaims and their templates of
// resource.k8s.io/v1, the version dra-driver-sriov speaks
// (k8snetworkplumbingwg/dra-driver-sriov pkg/driver/driver.go@14490e9d438b),
// which kube-apiserver serves by default from 1.34 on (kubernetes/kubernetes
// pkg/controlplane/instance.go@v1.36.3, stableAPIGroupVersionsEnabledByDefault;
// config.DRAMinKubeMinor). A k3s image whose tag names no version is only
// found out here; the error names the way out.
func CheckDRAServed(disc discovery.DiscoveryInterface) error {
	gv := resourcev1.SchemeGroupVersion.String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("asking the API server for %s: %w", gv, err)
	}
	have := map[string]bool{}
	if list != nil {
		for _, r := range list.APIResources {
			have[r.Name] = true
		}
	}
	for _, r := range []string{"resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"} {
		if !have[r] {
			return fmt.Errorf("the API server does not serve %s %s, which vfAllocation dra needs (Kubernetes 1.%d or later serves it by default): use a newer k3sImage, or vfAllocation devicePlugin", gv, r, config.DRAMinKubeMinor)
		}
	}
	return nil
}

// WaitDRASlices waits until the driver publishes, for each node in want,
// a complete pool holding exactly want[node][pf] VFs of each of its PFs,
// each with its PCI address: the driver found every VF the lane created
// on that agent, no more, no fewer. It is DRA mode's counterpart of
// WaitAllocatable.
func WaitDRASlices(ctx context.Context, cs kubernetes.Interface, want map[string]map[string]int) error {
	if len(want) == 0 {
		return nil
	}
	var pools map[string]DRAPool
	err := watchUntil(ctx, resourceSlicesLW(cs), &resourcev1.ResourceSlice{}, func(objs []any) (bool, error) {
		list := make([]resourcev1.ResourceSlice, 0, len(objs))
		for _, o := range objs {
			list = append(list, *o.(*resourcev1.ResourceSlice))
		}
		pools = DRAPools(list)
		for node := range want {
			if p, ok := pools[node]; draPending(p, ok, want[node]) != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err == nil {
		return nil
	}
	return nodesPending(ctx, cs, fmt.Sprintf("waiting for %s ResourceSlices: %v", DRADriverName, err), slices.Collect(maps.Keys(want)), func(node string) string {
		p, ok := pools[node]
		return draPending(p, ok, want[node])
	})
}

// draPending says what p lacks against want (VFs per PF), or "";
// published is false when the node has no slice at all.
func draPending(p DRAPool, published bool, want map[string]int) string {
	if !published {
		return "no ResourceSlice published"
	}
	if p.Incomplete {
		return "its pool's slices are being replaced"
	}
	for _, d := range p.Devices {
		if d.PCIAddress == "" {
			return fmt.Sprintf("device %s has no %s", d.Name, DRAAttrPCIAddress)
		}
	}
	have := p.PerPF()
	if maps.Equal(have, want) {
		return ""
	}
	return fmt.Sprintf("VFs per PF: want %s, published %s", perPF(want), perPF(have))
}

func perPF(m map[string]int) string {
	var out []string
	for _, pf := range slices.Sorted(maps.Keys(m)) {
		name := pf
		if name == "" {
			name = "(no PF)"
		}
		out = append(out, fmt.Sprintf("%s %d", name, m[pf]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
