package reset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"

	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// clusterObject is an object as reset reads it now.
type clusterObject struct {
	objectRef
	Labels     map[string]string
	Finalizers []string
	// Deleting is set once the object has a deletion timestamp.
	Deleting bool
}

// apiState is what the cluster holds now, as readCluster found it.
type apiState struct {
	Namespaces []clusterObject
	Objects    []clusterObject
	// Unlisted are the group/versions not read (as in baseline).
	Unlisted []string
	// ListErrors are the types whose list failed.
	ListErrors map[schema.GroupVersionResource]error
	// PVs says, of each PersistentVolume among Objects, what reset needs
	// beyond its metadata.
	PVs map[string]pvFacts
}

// pvFacts are a PersistentVolume's claim and who removes it.
type pvFacts struct {
	// ClaimNamespace is the namespace of the claim it is bound to ("" for
	// none).
	ClaimNamespace string
	// Provisioned: made by a dynamic provisioner (pv.kubernetes.io/provisioned-by)
	// with reclaim policy Delete, which removes the volume's storage and
	// then the PV once its claim is gone; a PV deleted before that is never
	// handed to the provisioner (shouldDelete is false for a PV with a
	// deletion timestamp: sigs.k8s.io/sig-storage-lib-external-provisioner
	// controller/controller.go@v11.0.1, the library local-path-provisioner
	// v0.0.36 runs), whose storage on the node stays.
	Provisioned bool
}

var pvGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}

// readPVs reads what pvFacts holds for every PersistentVolume.
func readPVs(ctx context.Context, kc *kube.Clients) (map[string]pvFacts, error) {
	list, err := kc.Typed.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]pvFacts{}
	for _, pv := range list.Items {
		var f pvFacts
		if pv.Spec.ClaimRef != nil {
			f.ClaimNamespace = pv.Spec.ClaimRef.Namespace
		}
		// The annotation kube-controller-manager's PV controller and
		// external provisioners set on what they provision
		// (k8s.io/kubernetes pkg/controller/volume/persistentvolume/util).
		f.Provisioned = pv.Annotations["pv.kubernetes.io/provisioned-by"] != "" && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
		out[pv.Name] = f
	}
	return out, nil
}

var (
	namespacesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// apiServiceManagedLabel marks the APIServices kube-apiserver registers for
// its own groups ("onstart") and for every CRD group/version ("true"); an
// APIService without it points at another server (an aggregated API).
// kubernetes/kube-aggregator pkg/controllers/autoregister.
const apiServiceManagedLabel = "kube-aggregator.kubernetes.io/automanaged"

func apiServiceLocal(labels map[string]string) bool {
	v := labels[apiServiceManagedLabel]
	return v == "onstart" || v == "true"
}

// listWorkers bounds the lists readCluster, and the emptying of a
// namespace, run at once: enough to hide the round trips, few enough not to
// crowd the lane's one API server.
const listWorkers = 8

type resourceType struct {
	gvr  schema.GroupVersionResource
	kind string
}

// readCluster reads every namespace and every cluster-scoped object of a
// type that supports list and delete, as discovery reports them now; skip,
// when set, leaves types out that the caller will never act on. A group
// whose discovery fails, and the group/versions another API server serves
// (an aggregated API: its objects are that server's business, and often a
// view of custom resources read here anyway, as Calico's projectcalico.org
// is), are reported as unlisted.
func readCluster(ctx context.Context, kc *kube.Clients, skip func(schema.GroupResource) bool) (*apiState, error) {
	lists, err := kc.Discovery.ServerPreferredResourcesWithContext(ctx)
	st := &apiState{ListErrors: map[schema.GroupVersionResource]error{}}
	if err != nil {
		failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err)
		if !ok {
			return nil, fmt.Errorf("discovering the API's resource types: %w", err)
		}
		for gv := range failed {
			st.Unlisted = append(st.Unlisted, gv.String())
		}
	}
	var all []resourceType
	for _, rl := range lists {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range rl.APIResources {
			if r.Namespaced || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			all = append(all, resourceType{gvr: gv.WithResource(r.Name), kind: r.Kind})
		}
	}
	// APIServices first: they say which group/versions are served elsewhere.
	remote := map[string]bool{}
	for _, t := range all {
		if t.gvr.GroupResource() != apiServicesGVR.GroupResource() {
			continue
		}
		objs, err := listType(ctx, kc.Metadata, t)
		if err != nil {
			return nil, fmt.Errorf("listing APIServices: %w", err)
		}
		if skip == nil || !skip(t.gvr.GroupResource()) {
			st.Objects = append(st.Objects, objs...)
		}
		for _, o := range objs {
			if !apiServiceLocal(o.Labels) {
				// Named <version>.<group>: "v1beta1.metrics.k8s.io".
				if v, g, ok := strings.Cut(o.Name, "."); ok {
					remote[schema.GroupVersion{Group: g, Version: v}.String()] = true
				}
			}
		}
	}
	var todo []resourceType
	unlisted := map[string]bool{}
	for _, t := range all {
		gv := t.gvr.GroupVersion().String()
		switch {
		case remote[gv]:
			unlisted[gv] = true
		case t.gvr.GroupResource() == apiServicesGVR.GroupResource():
			// Listed above.
		case skip != nil && skip(t.gvr.GroupResource()):
		default:
			todo = append(todo, t)
		}
	}
	for gv := range unlisted {
		st.Unlisted = append(st.Unlisted, gv)
	}
	slices.Sort(st.Unlisted)

	var mu sync.Mutex
	var listing errgroup.Group // each list's error is kept, not returned
	listing.SetLimit(listWorkers)
	for _, t := range todo {
		listing.Go(func() error {
			objs, err := listType(ctx, kc.Metadata, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
				// The type went away since discovery (a CRD being deleted).
			case err != nil:
				st.ListErrors[t.gvr] = err
			case t.gvr.GroupResource() == namespacesGVR.GroupResource():
				st.Namespaces = append(st.Namespaces, objs...)
			default:
				st.Objects = append(st.Objects, objs...)
			}
			return nil
		})
	}
	// nil while every list keeps its own error; one returned is not lost.
	if err := listing.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(st.Objects, func(o clusterObject) bool { return o.gvr() == pvGVR }) {
		pvs, err := readPVs(ctx, kc)
		if err != nil {
			st.ListErrors[pvGVR] = err
		}
		st.PVs = pvs
	}
	sortObjects(st.Namespaces)
	sortObjects(st.Objects)
	return st, nil
}

func listType(ctx context.Context, md metadata.Interface, t resourceType) ([]clusterObject, error) {
	list, err := md.Resource(t.gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]clusterObject, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, clusterObject{
			objectRef: objectRef{
				Group: t.gvr.Group, Version: t.gvr.Version, Resource: t.gvr.Resource, Kind: t.kind,
				Name: it.Name, UID: it.UID,
			},
			Labels:     it.Labels,
			Finalizers: it.Finalizers,
			Deleting:   it.DeletionTimestamp != nil,
		})
	}
	return out, nil
}

func sortObjects(objs []clusterObject) {
	slices.SortFunc(objs, func(a, b clusterObject) int {
		return strings.Compare(a.Group+"/"+a.Resource+"/"+a.Name, b.Group+"/"+b.Resource+"/"+b.Name)
	})
}
