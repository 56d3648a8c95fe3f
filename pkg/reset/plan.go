package reset

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

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
	// Provisioned are PersistentVolumes left to their provisioner, whose
	// claims go with the namespaces reset deletes: waited for, not deleted.
	Provisioned []clusterObject
	// Lost are baseline namespaces that are gone or going.
	Lost []string
	// Kept are the namespaces that stay, sorted: the job's claims in them
	// go on their own (claims.go).
	Kept []string
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
	for _, o := range slices.Concat(deleted, p.Terminating, p.Provisioned) {
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
func planReset(b *Baseline, st *apiState) resetPlan {
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
	// keptNS are the namespaces that stay, with the claims in them.
	keptNS := map[string]bool{}
	for _, ns := range st.Namespaces {
		now[ns.UID] = true
		switch {
		case uids[ns.UID]:
			if ns.Deleting {
				p.Lost = append(p.Lost, "namespace "+ns.Name+" of the baseline is being deleted")
			} else {
				keptNS[ns.Name] = true
			}
		case immortalNamespaces[ns.Name]:
			keptNS[ns.Name] = !ns.Deleting
		case ns.Deleting:
			p.Terminating = append(p.Terminating, ns)
		default:
			p.Namespaces = append(p.Namespaces, ns)
		}
	}
	for ns, kept := range keptNS {
		if kept {
			p.Kept = append(p.Kept, ns)
		}
	}
	sort.Strings(p.Kept)
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
		pv, isPV := st.PVs[o.Name]
		isPV = isPV && o.gvr() == pvGVR && pv.ClaimNamespace != ""
		switch {
		case isPV && keptNS[pv.ClaimNamespace]:
			// Bound to a claim reset leaves alone: the claim needs it.
		case isPV && pv.Provisioned:
			p.Provisioned = append(p.Provisioned, o)
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
