package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Component is one network component: the objects the lane applies for it
// and the upstream files they follow, so a reviewer can diff the two.
type Component struct {
	// Name is short and file-name safe ("flannel", "multus", ...).
	Name string
	// Upstream names each followed file as "repo PATH@TAG".
	Upstream []string
	Objects  []*unstructured.Unstructured
	// Pending are pinned manifests not fetched (Calico, offline): their
	// objects are missing from Objects.
	Pending []PendingFetch
}

// Upstream files the components follow.
const (
	FlannelUpstream      = "flannel-io/flannel Documentation/kube-flannel.yml@v0.28.9"
	MultusUpstream       = "k8snetworkplumbingwg/multus-cni deployments/multus-daemonset-thick.yml@v4.3.0"
	SRIOVCNIUpstream     = "k8snetworkplumbingwg/sriov-cni images/sriov-cni-daemonset.yaml@v2.10.0"
	DevicePluginUpstream = "k8snetworkplumbingwg/sriov-network-device-plugin deployments/sriovdp-daemonset.yaml@v3.11.0"
)

// Components returns the lane's components for o, primary CNI first; each
// component's objects are in apply order. The result is deterministic for
// the same o (and, for Calico, the same pinned manifests). Calico reads its
// manifests (override, cache or download), hence the context.
func Components(ctx context.Context, o Options) ([]Component, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("network component options: %w", err)
	}
	var out []Component
	typed := func(name string, upstream []string, objs []runtime.Object) error {
		us, err := ToUnstructuredList(objs)
		if err != nil {
			return err
		}
		out = append(out, Component{Name: name, Upstream: upstream, Objects: us})
		return nil
	}
	switch o.CNI {
	case config.CNIFlannel:
		f, err := flannelObjects(o)
		if err != nil {
			return nil, err
		}
		if err := typed("flannel", []string{FlannelUpstream}, f); err != nil {
			return nil, err
		}
	case config.CNICalico:
		objs, pending, err := calicoObjects(ctx, o)
		if err != nil {
			return nil, err
		}
		var up []string
		for _, m := range o.Calico.Manifests {
			up = append(up, "projectcalico/calico manifests/"+m.Name+"@"+CalicoVersion)
		}
		up = append(up, "projectcalico/calico manifests/custom-resources.yaml@"+CalicoVersion+" (Installation)")
		out = append(out, Component{Name: "calico", Upstream: up, Objects: objs, Pending: pending})
	default:
		return nil, fmt.Errorf("no primary CNI %q", o.CNI)
	}
	m, err := multusObjects(o)
	if err != nil {
		return nil, err
	}
	if err := typed("multus", []string{MultusUpstream}, m); err != nil {
		return nil, err
	}
	if o.VFAllocation == config.VFAllocationDRA {
		// The driver's init container installs sriov-cni itself, and its
		// slices replace the device plugin's extended resource, as
		// kubevirtci's DRA branch deploys neither (config_sriov_cluster.sh@39bd4947ba4d).
		if err := typed(DRAComponent, slices.Clone(DRAUpstream), draObjects(o)); err != nil {
			return nil, err
		}
	} else {
		if err := typed("sriov-cni", []string{SRIOVCNIUpstream}, sriovCNIObjects(o)); err != nil {
			return nil, err
		}
		dp, err := devicePluginObjects(o)
		if err != nil {
			return nil, err
		}
		if err := typed("sriov-device-plugin", []string{DevicePluginUpstream}, dp); err != nil {
			return nil, err
		}
	}
	if o.NetworkResourcesInjector.Enabled {
		if err := typed(InjectorName, slices.Clone(InjectorUpstream), injectorObjects(o)); err != nil {
			return nil, err
		}
	}
	for i := range out {
		for _, u := range out[i].Objects {
			// Also marks upstream objects as the lane's, and gives every
			// apply at least one field: an apply that owns no field leaves
			// no managedFields entry, and the server then adds one on the
			// next apply, which would change the resourceVersion.
			l := u.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[managedByLabel] = ManagedByLabelValue
			u.SetLabels(l)
		}
		SortForApply(out[i].Objects)
	}
	return out, nil
}

// Flatten joins the components' objects in apply order and collects what
// they could not fetch.
func Flatten(cs []Component) ([]*unstructured.Unstructured, []PendingFetch) {
	var objs []*unstructured.Unstructured
	var pending []PendingFetch
	for _, c := range cs {
		objs = append(objs, c.Objects...)
		pending = append(pending, c.Pending...)
	}
	SortForApply(objs)
	return objs, pending
}

// Objects returns every object the lane applies for o, in apply order:
// namespaces, CRDs, RBAC, ConfigMaps, workloads, then custom resources.
func Objects(ctx context.Context, o Options) ([]*unstructured.Unstructured, error) {
	cs, err := Components(ctx, o)
	if err != nil {
		return nil, err
	}
	objs, pending := Flatten(cs)
	if len(pending) > 0 {
		return nil, fmt.Errorf("%s: %w", pending[0].URL, ErrNotCached)
	}
	return objs, nil
}

// kindOrder ranks kinds so that everything an object needs exists before
// it; unknown kinds (custom resources) go last, after their CRDs.
var kindOrder = []string{
	"Namespace",
	"CustomResourceDefinition",
	"PriorityClass",
	"ServiceAccount",
	"ClusterRole",
	"Role",
	"ClusterRoleBinding",
	"RoleBinding",
	"Secret",
	"ConfigMap",
	"Service",
	"DaemonSet",
	"Deployment",
	"StatefulSet",
	"Job",
	"Pod",
}

func kindRank(u *unstructured.Unstructured) int {
	if i := slices.Index(kindOrder, u.GetKind()); i >= 0 && isBuiltinGroup(u.GroupVersionKind().Group) {
		return i
	}
	return len(kindOrder)
}

// isBuiltinGroup tells a core kind from a custom resource of the same name.
func isBuiltinGroup(g string) bool {
	switch g {
	case "", "apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io":
		return true
	}
	return false
}

// SortForApply orders objs by kind rank, keeping the given order within a
// rank (stable), so upstream manifests keep their own internal order.
func SortForApply(objs []*unstructured.Unstructured) {
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return kindRank(a) - kindRank(b)
	})
}

// ToUnstructured converts a typed object, dropping the null fields the
// typed structs cannot omit (creationTimestamp) and the status (the lane
// never sets one; a DaemonSet's zero counters are not omitted), so `plan`
// shows only what the lane sets and apply claims only those fields.
func ToUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	pruneNulls(m)
	delete(m, "status")
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, fmt.Errorf("%T %s has no TypeMeta", obj, u.GetName())
	}
	return u, nil
}

// ToUnstructuredList is ToUnstructured of each of objs, in their order.
func ToUnstructuredList(objs []runtime.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func pruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			pruneNulls(e)
			// An empty metadata map left by pruning creationTimestamp
			// (pod templates) says nothing.
			if k == "metadata" {
				if mm, ok := t[k].(map[string]any); ok && len(mm) == 0 {
					delete(t, k)
				}
			}
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
}

// Render writes objs as a YAML stream ("yaml", documents separated by
// "---") or as a JSON v1 List ("json").
func Render(w io.Writer, objs []*unstructured.Unstructured, format string) error {
	switch format {
	case "yaml", "":
		for _, u := range objs {
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return fmt.Errorf("encoding %s %s as YAML: %w", u.GetKind(), u.GetName(), err)
			}
			if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
				return err
			}
		}
		return nil
	case "json":
		items := make([]any, len(objs))
		for i, u := range objs {
			items[i] = u.Object
		}
		b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding objects as JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	default:
		return fmt.Errorf("output format %q: want yaml or json", format)
	}
}
