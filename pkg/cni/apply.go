package cni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// crdEstablishTimeout bounds the wait for a CRD applied in the same batch;
// the API server establishes a CRD in well under a second.
const crdEstablishTimeout = 2 * time.Minute

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Apply server-side applies objs in order with field manager "sriov-lane",
// forcing conflicts (the lane owns these objects). Consecutive objects of
// the same kind rank (see kindOrder) form a tier: a tier starts only once
// the one before it is applied, and its objects are applied concurrently,
// since nothing of one rank depends on another of the same rank. Before the
// first tier holding a kind defined by a CRD in objs, it waits for that CRD
// to be Established and refreshes discovery. It logs one V(1) line per
// applied object, in objs order.
// Applying the same objects again is a no-op on the server
// (resourceVersions unchanged).
func Apply(ctx context.Context, kc *kube.Clients, objs []*unstructured.Unstructured, lg log.Logger) error {
	a := &applier{
		dyn:         kc.Dynamic,
		mapper:      kc.Mapper,
		crdOf:       crdKinds(objs),
		established: map[string]bool{},
	}
	for _, tier := range tiers(objs) {
		if err := a.applyTier(ctx, tier, lg); err != nil {
			return err
		}
	}
	return nil
}

const (
	// applyParallel bounds the requests of one tier in flight at once
	// (upstream manifests such as Calico's have dozens of CRDs).
	applyParallel = 8
)

// crdKinds maps the kinds defined by CRDs in objs to their CRD's name.
func crdKinds(objs []*unstructured.Unstructured) map[schema.GroupKind]string {
	crdOf := map[schema.GroupKind]string{}
	for _, u := range objs {
		if u.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		crdOf[schema.GroupKind{Group: group, Kind: kind}] = u.GetName()
	}
	return crdOf
}

// tiers splits objs into runs of consecutive objects of equal kind rank;
// custom resources (which share the last rank) split by kind as well, so an
// upstream manifest's order between its own kinds is kept.
func tiers(objs []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	var out [][]*unstructured.Unstructured
	key := func(u *unstructured.Unstructured) string {
		r := kindRank(u)
		if r < len(kindOrder) {
			return kindOrder[r]
		}
		return u.GroupVersionKind().GroupKind().String()
	}
	for i, u := range objs {
		if i == 0 || key(u) != key(objs[i-1]) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], u)
	}
	return out
}

type applier struct {
	dyn         dynamic.Interface
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	crdOf       map[schema.GroupKind]string
	established map[string]bool
}

func (a *applier) applyTier(ctx context.Context, tier []*unstructured.Unstructured, lg log.Logger) error {
	if err := a.awaitCRDs(ctx, tier); err != nil {
		return err
	}
	// Resolved up front and in order: the mapper's first use runs
	// discovery, which the tier's goroutines would otherwise all wait on.
	type job struct {
		ri  dynamic.ResourceInterface
		obj *unstructured.Unstructured
		out *unstructured.Unstructured
		err error
	}
	jobs := make([]job, len(tier))
	for i, u := range tier {
		ri, obj, err := a.resource(u)
		if err != nil {
			return err
		}
		jobs[i] = job{ri: ri, obj: obj}
	}
	// Each job keeps its own error, reported in objs order below, so the
	// group's goroutines return none.
	var g errgroup.Group
	g.SetLimit(applyParallel)
	for i := range jobs {
		j := &jobs[i]
		g.Go(func() error {
			j.out, j.err = j.ri.Apply(ctx, j.obj.GetName(), j.obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			return nil
		})
	}
	_ = g.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return fmt.Errorf("applying %s %s: %w", j.obj.GetKind(), describe(j.obj), j.err)
		}
		lg.V(1).Infof("applied %s %s (resourceVersion %s)", j.obj.GetKind(), describe(j.obj), j.out.GetResourceVersion())
	}
	return nil
}

// awaitCRDs waits, concurrently, for the CRDs of the tier's custom kinds
// that are not known to be Established yet, then refreshes discovery.
func (a *applier) awaitCRDs(ctx context.Context, tier []*unstructured.Unstructured) error {
	var need []string
	for _, u := range tier {
		if crd, ok := a.crdOf[u.GroupVersionKind().GroupKind()]; ok && !a.established[crd] && !slices.Contains(need, crd) {
			need = append(need, crd)
		}
	}
	if len(need) == 0 {
		return nil
	}
	errs := make([]error, len(need))
	var wg sync.WaitGroup
	for i, crd := range need {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = waitCRDEstablished(ctx, a.dyn, crd)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, crd := range need {
		a.established[crd] = true
	}
	a.mapper.Reset()
	return nil
}

// resource finds where u is served and returns a copy of u fit to send:
// namespaced objects get "default" when they name no namespace,
// cluster-scoped ones lose any namespace they name.
func (a *applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, *unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if apimeta.IsNoMatchError(err) {
		// Discovery may predate a CRD applied earlier in this batch.
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("applying %s %s: resolving its resource: %w", gvk.Kind, describe(u), err)
	}
	obj := u.DeepCopy()
	if mapping.Scope.Name() == apimeta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		return a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()), obj, nil
	}
	obj.SetNamespace("")
	return a.dyn.Resource(mapping.Resource), obj, nil
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
	lw := listWatch(dyn, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
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
