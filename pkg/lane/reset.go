package lane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// DefaultResetTimeout bounds reset's wait for what it deleted to be gone.
const DefaultResetTimeout = 2 * time.Minute

// ResetOptions tune Reset.
type ResetOptions struct {
	// Docker is the command run's Docker client (nil: Reset makes its own).
	Docker  *client.Client
	Out     io.Writer
	Verbose bool
	// Timeout bounds the wait for the deleted namespaces (and objects with
	// finalizers) to be gone; DefaultResetTimeout when zero.
	Timeout time.Duration
}

// ResetReport says what Reset did.
type ResetReport struct {
	// Namespaces and Objects are what reset deleted ("ClusterRole x").
	Namespaces []string
	Objects    []string
	// Repaired are the agents whose PFs or VFs were put back.
	Repaired []string
}

// Reset returns a running lane to the state up left it in, for the next CI
// job, without recreating the cluster. It deletes the namespaces and the
// cluster-scoped objects that are not in the baseline up recorded (minus
// what the system makes on its own, see planReset), empties the namespaces
// itself and waits until everything is gone (emptyns.go says why), checks that every PF is in its agent with its VFs as configured (the
// checks and repair of `repair`), and waits as up does.
func Reset(ctx context.Context, l *config.Lane, opts ResetOptions) (ResetReport, error) {
	var rep ResetReport
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultResetTimeout
	}
	if !l.Dir().Exists() {
		return rep, fmt.Errorf("lane %s does not exist (no journal %s)", l.Name, l.Dir().Journal())
	}
	b, err := loadBaseline(l)
	if err != nil {
		return rep, err
	}
	// The journal's lock keeps up, down and repair off the lane meanwhile.
	c, closeLane, err := openLane(l, opts.Docker, opts.Out, opts.Verbose)
	if err != nil {
		return rep, err
	}
	defer closeLane()
	if err := c.connect(); err != nil {
		return rep, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	progress := c.Progress
	fail := func(err error) (ResetReport, error) {
		return rep, fmt.Errorf("resetting lane %s: %w", l.Name, err)
	}

	// One bound for every wait on deletions, as --timeout promises.
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	said := map[string]bool{}
	pass := func(name string) (int, error) {
		progress.Start(name)
		p, deleted, err := deletePass(ctx, c.Kube, b, progress.Detailf)
		progress.End(err)
		for _, o := range deleted {
			if o.isNamespace() {
				rep.Namespaces = append(rep.Namespaces, o.Name)
			} else {
				rep.Objects = append(rep.Objects, o.String())
			}
		}
		if err != nil {
			return 0, err
		}
		for _, lost := range p.Lost {
			if said[lost] {
				continue
			}
			said[lost] = true
			progress.Infof("%s: reset cannot bring back what up made there; run 'sriov-lane down --name %s', then up, if the lane misses it", lost, l.Name)
		}
		namespaces, objects := p.waitFor(deleted)
		if len(namespaces)+len(objects) > 0 {
			progress.Start("wait for deletions")
			// Emptying runs beside the wait: the wait says when
			// everything is gone, whoever finished the namespaces.
			var emptyErr error
			var wg sync.WaitGroup
			wg.Go(func() { emptyErr = emptyNamespaces(wctx, c.Kube, namespaces, progress.Detailf) })
			err := waitDeleted(wctx, c.Kube, namespaces, objects)
			wg.Wait()
			if emptyErr != nil {
				if err != nil {
					err = fmt.Errorf("%w\nreset's own emptying of the namespaces: %v", err, emptyErr)
				} else {
					progress.Detailf("left the namespaces to kube-controller-manager: %v", emptyErr)
				}
			}
			progress.End(err)
			if err != nil {
				return 0, err
			}
		}
		n := 0
		for _, o := range deleted {
			if o.isNamespace() {
				n++
			}
		}
		return n, nil
	}
	namespaces, err := pass("delete what up did not make")
	if err != nil {
		return fail(err)
	}
	if namespaces > 0 {
		// The controllers in those namespaces ran until their pods were
		// gone, and an operator among them (KubeVirt's reconciles its CRDs,
		// webhooks and ClusterRoles) may have made again what was deleted.
		if _, err := pass("delete what came back"); err != nil {
			return fail(err)
		}
	}

	repaired, _, err := repairAgents(ctx, c)
	rep.Repaired = repaired
	if err != nil {
		return fail(err)
	}
	if err := restartDevicePlugins(ctx, c, repaired); err != nil {
		return fail(err)
	}
	progress.Start("wait for VFs")
	err = waitAsUp(ctx, c)
	progress.End(err)
	if err != nil {
		return fail(err)
	}
	return rep, nil
}

// waitAsUp runs up's own wait (nodes Ready, the lane's DaemonSets rolled
// out, Calico available, every agent's VFs allocatable) on an opened and
// connected lane.
func waitAsUp(ctx context.Context, c *Session) error {
	opts := CNIOptions(c.Lane, c.pfNamesInNodes())
	// Only the names of the lane's workloads are needed: never download.
	opts.Calico.Offline = true
	objs, err := cni.Objects(ctx, opts)
	if err != nil {
		c.Progress.Infof("not waiting for the lane's DaemonSets: %v", err)
	}
	c.objects = objs
	return stepWait(ctx, c)
}

// deletePass reads the cluster, plans against the baseline and deletes what
// the plan says. A type that could not be read fails the pass before
// anything is deleted: acting on part of the cluster would leave a lane
// that only looks reset.
func deletePass(ctx context.Context, kc *kube.Clients, b *baseline, detailf func(string, ...any)) (resetPlan, []clusterObject, error) {
	st, err := readCluster(ctx, kc, systemType)
	if err != nil {
		return resetPlan{}, nil, err
	}
	p := planReset(b, st)
	if err := p.unreadableErr(); err != nil {
		return p, nil, err
	}
	for _, o := range p.Replaced {
		detailf("keeping %s: it replaces the baseline's of that name", o)
	}
	deleted, err := deletePlanned(ctx, kc.Metadata, p, detailf)
	return p, deleted, err
}

// immortalNamespaces are the namespaces kube-apiserver makes and refuses to
// delete (or makes again at once).
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true, corev1.NamespaceNodeLease: true,
}

// systemTypes are the cluster-scoped types reset never deletes from: the
// control plane, the kubelets and the lane's own components make and remake
// their objects after up, and deleting one would break what made it.
var systemTypes = map[schema.GroupResource]bool{
	// Kubelets register their node (again, after an agent restarts), with
	// its CSINode, and ask for their certificates.
	{Resource: "nodes"}:                                                    true,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                        true,
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: true,
	// The attach/detach controller owns these and removes them with the pods.
	{Group: "storage.k8s.io", Resource: "volumeattachments"}: true,
	// kube-apiserver's: one IPAddress per Service ClusterIP, wherever the
	// Service lives; its service CIDRs; storage versions.
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:             true,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:            true,
	{Group: "internal.apiserver.k8s.io", Resource: "storageversions"}: true,
	// DRA drivers publish these per node.
	{Group: "resource.k8s.io", Resource: "resourceslices"}: true,
	// Calico's IPAM allocates these for every pod (in kube-system too);
	// deleting one of a running pod corrupts IPAM.
	{Group: "crd.projectcalico.org", Resource: "ipamblocks"}:      true,
	{Group: "crd.projectcalico.org", Resource: "blockaffinities"}: true,
	{Group: "crd.projectcalico.org", Resource: "ipamhandles"}:     true,
	// The Tigera operator reports each component it brings up here.
	{Group: "operator.tigera.io", Resource: "tigerastatuses"}: true,
}

// systemGroups are API groups whose cluster-scoped objects are all made by
// the system: k3s's own (ETCDSnapshotFiles, which k3s makes on a schedule).
var systemGroups = map[string]bool{"k3s.cattle.io": true}

func systemType(gr schema.GroupResource) bool { return systemTypes[gr] || systemGroups[gr.Group] }

var (
	crdGR           = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	priorityClassGR = schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}
)

// blocker reports whether objects of gr must go before the namespaces: an
// admission webhook or policy, or an aggregated APIService, whose server
// lives in a namespace reset deletes. Left behind, a webhook that fails
// closed refuses the deletes of the objects it watches, and an APIService
// without its server makes discovery fail, which stops the namespace
// controller from ever finishing a namespace (NamespaceDeletionDiscoveryFailure).
func blocker(gr schema.GroupResource) bool {
	return gr.Group == "admissionregistration.k8s.io" || gr == apiServicesGVR.GroupResource()
}

func (o objectRef) isNamespace() bool { return o.gr() == namespacesGVR.GroupResource() }

// resetPlan is what reset deletes, in this order: blockers, namespaces,
// other cluster-scoped objects, then CRDs, which take their custom
// resources (in any namespace) with them.
type resetPlan struct {
	Blockers, Namespaces, Objects, CRDs []clusterObject
	// Terminating are not in the baseline and already being deleted (by
	// the job, or by a reset that timed out): waited for, not deleted again.
	Terminating []clusterObject
	// Replaced are kept although their UID is not the baseline's: they
	// have the type and name of a baseline object, made again (a job that
	// re-applied one of the lane's ClusterRoles, kube-apiserver restoring
	// one of its own), and deleting them would leave the lane without it.
	Replaced []clusterObject
	// Lost are baseline namespaces that are gone or going.
	Lost []string
	// Unreadable are the types whose list failed and whose objects nothing
	// else in the plan removes.
	Unreadable map[schema.GroupVersionResource]error
}

// deletes is the plan's deletes in order.
func (p resetPlan) deletes() []clusterObject {
	return slices.Concat(p.Blockers, p.Namespaces, p.Objects, p.CRDs)
}

func (p resetPlan) unreadableErr() error {
	if len(p.Unreadable) == 0 {
		return nil
	}
	var names []string
	for gvr, err := range p.Unreadable {
		names = append(names, fmt.Sprintf("%s: %v", gvr.GroupResource(), err))
	}
	sort.Strings(names)
	return fmt.Errorf("cannot list every cluster-scoped type, nothing deleted:\n  %s", strings.Join(names, "\n  "))
}

// waitFor is what must be gone before the lane is reset: the namespaces
// and other objects deleted or already being deleted. A delete may return
// before its object is gone: kube-apiserver gives a CRD its cleanup
// finalizer on delete, and keeps it until its custom resources are gone.
func (p resetPlan) waitFor(deleted []clusterObject) (namespaces, objects []objectRef) {
	for _, o := range slices.Concat(deleted, p.Terminating) {
		if o.isNamespace() {
			namespaces = append(namespaces, o.objectRef)
		} else {
			objects = append(objects, o.objectRef)
		}
	}
	return namespaces, objects
}

// planReset compares what the cluster holds now with the baseline and says
// what to delete. Namespaces go by UID: one with a baseline name and
// another UID was made again by a job, with the job's content. Other
// objects are kept when their UID or their type and name are the
// baseline's, when they are the system's (systemTypes, names beginning
// "system:", PriorityClasses "system-*", APIServices kube-apiserver
// manages), or when their group/version was not read for the baseline.
// Custom resources of a CRD being deleted are left to the CRD.
func planReset(b *baseline, st *apiState) resetPlan {
	uids := map[types.UID]bool{}
	names := map[string]bool{}
	for _, o := range slices.Concat(b.Namespaces, b.Objects) {
		uids[o.UID] = true
		names[o.Group+"/"+o.Resource+"/"+o.Name] = true
	}
	unlisted := map[string]bool{}
	for _, gv := range b.Unlisted {
		unlisted[gv] = true
	}
	p := resetPlan{Unreadable: map[schema.GroupVersionResource]error{}}

	now := map[types.UID]bool{}
	for _, ns := range st.Namespaces {
		now[ns.UID] = true
		switch {
		case uids[ns.UID]:
			if ns.Deleting {
				p.Lost = append(p.Lost, "namespace "+ns.Name+" of the baseline is being deleted")
			}
		case immortalNamespaces[ns.Name]:
		case ns.Deleting:
			p.Terminating = append(p.Terminating, ns)
		default:
			p.Namespaces = append(p.Namespaces, ns)
		}
	}
	for _, ns := range b.Namespaces {
		if !now[ns.UID] && !immortalNamespaces[ns.Name] {
			p.Lost = append(p.Lost, "namespace "+ns.Name+" of the baseline was deleted")
		}
	}

	keep := func(o clusterObject) bool {
		switch {
		case uids[o.UID], systemType(o.gr()), unlisted[o.gvr().GroupVersion().String()],
			strings.HasPrefix(o.Name, "system:"),
			o.gr() == priorityClassGR && strings.HasPrefix(o.Name, "system-"),
			o.gr() == apiServicesGVR.GroupResource() && apiServiceLocal(o.Labels):
			return true
		case names[o.Group+"/"+o.Resource+"/"+o.Name]:
			p.Replaced = append(p.Replaced, o)
			return true
		}
		return false
	}
	// CRDs first: the custom resources of those that go, go with them.
	withCRD := map[schema.GroupResource]bool{}
	for _, o := range st.Objects {
		if o.gr() != crdGR || keep(o) {
			continue
		}
		resource, group, _ := strings.Cut(o.Name, ".")
		withCRD[schema.GroupResource{Group: group, Resource: resource}] = true
		if o.Deleting {
			p.Terminating = append(p.Terminating, o)
		} else {
			p.CRDs = append(p.CRDs, o)
		}
	}
	for _, o := range st.Objects {
		if o.gr() == crdGR || withCRD[o.gr()] || keep(o) {
			continue
		}
		switch {
		case o.Deleting:
			p.Terminating = append(p.Terminating, o)
		case blocker(o.gr()):
			p.Blockers = append(p.Blockers, o)
		default:
			p.Objects = append(p.Objects, o)
		}
	}
	for gvr, err := range st.ListErrors {
		if !withCRD[gvr.GroupResource()] && !unlisted[gvr.GroupVersion().String()] && !systemType(gvr.GroupResource()) {
			p.Unreadable[gvr] = err
		}
	}
	return p
}

// deletePlanned deletes what p says, in its order, each only while it is
// still the object the plan saw (a UID precondition): one made again under
// the same name meanwhile is left to the next pass. It goes on past
// failures and returns them together with what it deleted.
//
// kube-apiserver learns that a webhook configuration is gone from an
// informer, a moment after the delete; until then it still calls the
// webhook, whose server reset may be deleting too. So when blockers were
// deleted, what failed after them is tried again for blockerGoneGrace.
func deletePlanned(ctx context.Context, md metadata.Interface, p resetPlan, detailf func(string, ...any)) ([]clusterObject, error) {
	var deleted []clusterObject
	background := metav1.DeletePropagationBackground
	try := func(o clusterObject) error {
		uid := o.UID
		err := md.Resource(o.gvr()).Delete(ctx, o.Name, metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: &uid},
		})
		switch {
		case err == nil:
			deleted = append(deleted, o)
			detailf("deleted %s", o)
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			detailf("%s changed since it was read; left to the next pass: %v", o, err)
		default:
			return fmt.Errorf("deleting %s: %w", o, err)
		}
		return nil
	}
	type failure struct {
		o   clusterObject
		err error
	}
	var failed []failure
	blockerDeleted := false
	for i, o := range p.deletes() {
		n := len(deleted)
		if err := try(o); err != nil {
			failed = append(failed, failure{o, err})
		}
		blockerDeleted = blockerDeleted || i < len(p.Blockers) && len(deleted) > n
		if ctx.Err() != nil {
			return deleted, ctx.Err()
		}
	}
	if len(failed) > 0 && blockerDeleted {
		deadline := time.Now().Add(blockerGoneGrace)
		for len(failed) > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return deleted, ctx.Err()
			case <-time.After(resetPollInterval):
			}
			still := failed[:0]
			for _, f := range failed {
				if err := try(f.o); err != nil {
					still = append(still, failure{f.o, err})
				}
			}
			failed = still
		}
	}
	var errs []error
	for _, f := range failed {
		errs = append(errs, f.err)
	}
	return deleted, errors.Join(errs...)
}

// blockerGoneGrace bounds how long deletes are tried again after the
// webhooks and APIServices that refused them were deleted: kube-apiserver's
// informers see a delete well within a second.
var blockerGoneGrace = 10 * time.Second

// resetPollInterval is how often the waits look again: a namespace with
// nothing in it goes within a second or two, and each look is one list.
var resetPollInterval = 100 * time.Millisecond

// waitDeleted waits, both at once and within ctx, until the namespaces and
// the objects are gone.
func waitDeleted(ctx context.Context, kc *kube.Clients, namespaces, objects []objectRef) error {
	var wg sync.WaitGroup
	var nsErr, objErr error
	wg.Go(func() { nsErr = waitNamespacesGone(ctx, kc.Typed, namespaces) })
	wg.Go(func() { objErr = waitObjectsGone(ctx, kc.Metadata, objects) })
	wg.Wait()
	return errors.Join(nsErr, objErr)
}

// waitNamespacesGone waits until none of namespaces exists any more (by
// UID: one made again under its name does not count). When ctx ends first,
// the error names each one left with its phase, finalizers and the
// namespace controller's conditions, which say what content holds it.
func waitNamespacesGone(ctx context.Context, cs kubernetes.Interface, namespaces []objectRef) error {
	if len(namespaces) == 0 {
		return nil
	}
	start := time.Now()
	want := map[types.UID]bool{}
	for _, ns := range namespaces {
		want[ns.UID] = true
	}
	var left []corev1.Namespace
	var lastErr error
	for {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err == nil {
			left = left[:0]
			for _, ns := range list.Items {
				if want[ns.UID] {
					left = append(left, ns)
				}
			}
			if len(left) == 0 {
				return nil
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return namespacesLeft(namespaces, left, time.Since(start), ctx.Err(), lastErr)
		case <-time.After(resetPollInterval):
		}
	}
}

func namespacesLeft(asked []objectRef, left []corev1.Namespace, waited time.Duration, why, lastErr error) error {
	var b strings.Builder
	if left == nil {
		// Never listed: all of them, as far as anyone can tell.
		for _, ns := range asked {
			left = append(left, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}})
		}
	}
	fmt.Fprintf(&b, "%d namespace(s) still there after %s (%v):", len(left), waited.Round(time.Second), why)
	for _, ns := range left {
		fmt.Fprintf(&b, "\n  namespace %s: %s", ns.Name, namespaceState(ns))
	}
	if lastErr != nil {
		fmt.Fprintf(&b, "\n  last error listing namespaces: %v", lastErr)
	}
	b.WriteString("\na finalizer whose controller went with its namespace holds them; see 'kubectl get ns NAME -o yaml', run reset again with a longer --timeout, or down and up")
	return errors.New(b.String())
}

// namespaceState is what keeps a namespace: its phase, the finalizers left
// and the namespace controller's conditions that are true.
func namespaceState(ns corev1.Namespace) string {
	var parts []string
	if ns.Status.Phase != "" {
		parts = append(parts, string(ns.Status.Phase))
	}
	var fins []string
	for _, f := range ns.Spec.Finalizers {
		fins = append(fins, string(f))
	}
	fins = append(fins, ns.Finalizers...)
	if len(fins) > 0 {
		parts = append(parts, fmt.Sprintf("finalizers %v", fins))
	}
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	if len(parts) == 0 {
		return "state unknown"
	}
	return strings.Join(parts, "; ")
}

// waitObjectsGone waits until none of objs exists any more (by UID),
// listing each of their types once a round. When ctx ends first, the error
// names each one left with its finalizers.
func waitObjectsGone(ctx context.Context, md metadata.Interface, objs []objectRef) error {
	if len(objs) == 0 {
		return nil
	}
	start := time.Now()
	left := slices.Clone(objs)
	state := map[types.UID]string{}
	for {
		byType := map[schema.GroupVersionResource][]objectRef{}
		for _, o := range left {
			byType[o.gvr()] = append(byType[o.gvr()], o)
		}
		var still []objectRef
		for gvr, want := range byType {
			list, err := md.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				// The type itself is gone (a CRD's custom resources).
				continue
			}
			if err != nil {
				still = append(still, want...)
				if ctx.Err() == nil {
					for _, o := range want {
						state[o.UID] = "cannot tell: " + err.Error()
					}
				}
				continue
			}
			now := map[types.UID]metav1.PartialObjectMetadata{}
			for _, it := range list.Items {
				now[it.UID] = it
			}
			for _, o := range want {
				m, ok := now[o.UID]
				if !ok {
					continue
				}
				still = append(still, o)
				state[o.UID] = fmt.Sprintf("being deleted, finalizers %v", m.Finalizers)
				if m.DeletionTimestamp == nil {
					state[o.UID] = "not being deleted"
				}
			}
		}
		left = still
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			slices.SortFunc(left, func(a, b objectRef) int { return strings.Compare(a.String(), b.String()) })
			var b strings.Builder
			fmt.Fprintf(&b, "%d object(s) still there after %s (%v):", len(left), time.Since(start).Round(time.Second), ctx.Err())
			for _, o := range left {
				s := state[o.UID]
				if s == "" {
					s = "state unknown"
				}
				fmt.Fprintf(&b, "\n  %s: %s", o, s)
			}
			return errors.New(b.String())
		case <-time.After(resetPollInterval):
		}
	}
}
