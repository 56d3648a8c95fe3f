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
)

// Objects returns every object the lane applies for o, in apply order:
// namespaces, CRDs, RBAC, ConfigMaps, workloads, then custom resources. The
// result is deterministic for the same o (and, for Calico, the same pinned
// manifest). Calico fetches (or reads the cached/override) manifest, hence
// the context.
func Objects(ctx context.Context, o Options) ([]*unstructured.Unstructured, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("network component options: %w", err)
	}
	var typed []runtime.Object
	var extra []*unstructured.Unstructured
	switch o.CNI {
	case CNIFlannel:
		f, err := flannelObjects(o)
		if err != nil {
			return nil, err
		}
		typed = append(typed, f...)
	case CNICalico:
		c, err := calicoObjects(ctx, o)
		if err != nil {
			return nil, err
		}
		extra = append(extra, c...)
	}
	m, err := multusObjects(o)
	if err != nil {
		return nil, err
	}
	typed = append(typed, m...)
	typed = append(typed, sriovCNIObjects(o)...)
	dp, err := devicePluginObjects(o)
	if err != nil {
		return nil, err
	}
	typed = append(typed, dp...)
	if o.Smoke {
		s, err := smokeObjects(o)
		if err != nil {
			return nil, err
		}
		typed = append(typed, s...)
	}

	out := make([]*unstructured.Unstructured, 0, len(typed)+len(extra))
	for _, t := range typed {
		u, err := toUnstructured(t)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	out = append(out, extra...)
	for _, u := range out {
		// Also marks upstream objects as the lane's, and gives every apply
		// at least one field: an apply that owns no field leaves no
		// managedFields entry, and the server then adds one on the next
		// apply, which would change the resourceVersion.
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[managedByLabel] = ManagedByLabelValue
		u.SetLabels(l)
	}
	SortForApply(out)
	return out, nil
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

// toUnstructured converts a typed object, dropping the null fields the
// typed structs cannot omit (creationTimestamp) and the empty status, so
// `plan` shows only what the lane sets and apply claims only those fields.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	pruneNulls(m)
	if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
		delete(m, "status")
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, fmt.Errorf("%T %s has no TypeMeta", obj, u.GetName())
	}
	return u, nil
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
