package lane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// baselineVersion is the format of the baseline file; a reset that finds
// another refuses it rather than guess.
const baselineVersion = 1

// objectRef names one cluster-scoped object (namespaces are cluster-scoped
// too) by type, name and UID. The UID is what tells an object up left
// apart from one a job deleted and made again under the same name.
type objectRef struct {
	Group    string    `json:"group,omitempty"`
	Version  string    `json:"version"`
	Resource string    `json:"resource"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	UID      types.UID `json:"uid"`
}

func (o objectRef) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}
}

func (o objectRef) gr() schema.GroupResource {
	return schema.GroupResource{Group: o.Group, Resource: o.Resource}
}

func (o objectRef) String() string {
	if o.Group == "" && o.Resource == "namespaces" {
		return "namespace " + o.Name
	}
	return o.Kind + " " + o.Name
}

// baseline is what the cluster held when up finished: every namespace and
// every cluster-scoped object of a type that can be listed and deleted.
type baseline struct {
	Version    int         `json:"version"`
	Recorded   time.Time   `json:"recorded"`
	Namespaces []objectRef `json:"namespaces"`
	Objects    []objectRef `json:"objects"`
	// Unlisted are the group/versions whose objects were not read (their
	// discovery or listing failed, or another API server serves them):
	// reset cannot tell what of theirs is new, so it leaves them alone.
	Unlisted []string `json:"unlisted,omitempty"`
}

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

// listWorkers bounds the lists readCluster runs at once: enough to hide the
// round trips, few enough not to crowd the lane's one API server.
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
	var wg sync.WaitGroup
	sem := make(chan struct{}, listWorkers)
	for _, t := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
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
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
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

// recordBaseline reads the cluster as it is now.
func recordBaseline(ctx context.Context, kc *kube.Clients, now time.Time) (*baseline, error) {
	st, err := readCluster(ctx, kc, nil)
	if err != nil {
		return nil, err
	}
	b := &baseline{Version: baselineVersion, Recorded: now.UTC(), Unlisted: st.Unlisted}
	for _, o := range st.Namespaces {
		b.Namespaces = append(b.Namespaces, o.objectRef)
	}
	for _, o := range st.Objects {
		b.Objects = append(b.Objects, o.objectRef)
	}
	// A type whose list failed now cannot be told apart later either.
	for gvr := range st.ListErrors {
		b.Unlisted = append(b.Unlisted, gvr.GroupVersion().String())
	}
	slices.Sort(b.Unlisted)
	b.Unlisted = slices.Compact(b.Unlisted)
	return b, nil
}

// saveBaseline writes b into the lane dir, where down removes it with the
// lane. A file there is not a host change, so it is not journalled; it is
// written atomically so that a kill leaves the previous file or none.
func saveBaseline(l *config.Lane, b *baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(l.Dir().Baseline(), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving the baseline: %w", err)
	}
	return nil
}

// errNoBaseline is a lane up brought up before up recorded baselines.
var errNoBaseline = errors.New("no baseline")

func loadBaseline(l *config.Lane) (*baseline, error) {
	data, err := os.ReadFile(l.Dir().Baseline())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lane %s has %w (%s): it was brought up by a sriov-lane that did not record one; run 'sriov-lane down --name %s', then 'sriov-lane up', to get a lane that can be reset",
			l.Name, errNoBaseline, l.Dir().Baseline(), l.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("lane %s: reading its baseline: %w", l.Name, err)
	}
	var b baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("lane %s: reading its baseline %s: %w", l.Name, l.Dir().Baseline(), err)
	}
	if b.Version != baselineVersion {
		return nil, fmt.Errorf("lane %s: its baseline %s has version %d, this sriov-lane reads %d; run 'sriov-lane down --name %s', then 'sriov-lane up'",
			l.Name, l.Dir().Baseline(), b.Version, baselineVersion, l.Name)
	}
	return &b, nil
}

// stepRecordBaseline is up's last step: what the cluster holds now, after
// the components and the post-up hooks, is what reset returns the lane to.
func stepRecordBaseline(ctx context.Context, c *Session) error {
	b, err := recordBaseline(ctx, c.Kube, time.Now())
	if err != nil {
		return fmt.Errorf("recording what the cluster holds for reset: %w", err)
	}
	c.Progress.Detailf("%d namespaces, %d cluster-scoped objects", len(b.Namespaces), len(b.Objects))
	if len(b.Unlisted) > 0 {
		c.Progress.Detailf("not read (reset leaves them alone): %s", strings.Join(b.Unlisted, ", "))
	}
	return saveBaseline(c.Lane, b)
}
