package cni

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Logf receives one line per applied object; nil discards.
type Logf func(format string, args ...any)

// crdEstablishTimeout bounds the wait for a CRD applied in the same batch;
// the API server establishes a CRD in well under a second.
const crdEstablishTimeout = 2 * time.Minute

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Apply server-side applies objs in order with field manager "sriov-lane",
// forcing conflicts (the lane owns these objects). Before the first object
// of a kind defined by a CRD in objs, it waits for that CRD to be
// Established and refreshes discovery. Applying the same objects again is a
// no-op on the server (resourceVersions unchanged).
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, logf Logf) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))

	// Kinds whose CRD is part of this batch, and whether it is established yet.
	crdOf := map[schema.GroupKind]string{}
	for _, u := range objs {
		if u.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		crdOf[schema.GroupKind{Group: group, Kind: kind}] = u.GetName()
	}
	established := map[string]bool{}

	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if crd, ok := crdOf[gvk.GroupKind()]; ok && !established[crd] {
			if err := waitCRDEstablished(ctx, dyn, crd); err != nil {
				return err
			}
			established[crd] = true
			mapper.Reset()
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if apimeta.IsNoMatchError(err) {
			// Discovery may predate a CRD applied earlier in this batch.
			mapper.Reset()
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("applying %s %s: resolving its resource: %w", gvk.Kind, describe(u), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		obj := u.DeepCopy()
		if mapping.Scope.Name() == apimeta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		} else {
			obj.SetNamespace("")
		}
		out, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, describe(obj), err)
		}
		logf("applied %s %s (resourceVersion %s)", gvk.Kind, describe(obj), out.GetResourceVersion())
	}
	return nil
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// waitCRDEstablished watches one CRD until its Established condition is True.
func waitCRDEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	sel := "metadata.name=" + name
	ri := dyn.Resource(crdGVR)
	lw := listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = sel
		return ri.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return ri.Watch(ctx, o)
	})
	var last string
	err := watchUntil(ctx, lw, &unstructured.Unstructured{}, func(objs []any) (bool, error) {
		for _, o := range objs {
			conds, _, _ := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "status", "conditions")
			last = fmt.Sprint(conds)
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be Established (conditions %s): %w", name, last, err)
	}
	return nil
}
