package reset

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The diff at the heart of reset: what a job made goes, what up left and
// what the system makes on its own stays.
func TestPlanResetDeletesWhatIsNotInTheBaseline(t *testing.T) {
	b := &Baseline{
		Version: baselineVersion,
		Namespaces: []objectRef{
			ns("default", "u-default").objectRef, ns("kube-system", "u-kube-system").objectRef,
			ns("kube-flannel", "u-flannel").objectRef, ns("gone-lane-ns", "u-gone").objectRef,
		},
		Objects: []objectRef{
			obj(clusterRoles, "ClusterRole", "multus", "u-multus").objectRef,
			obj(clusterRoles, "ClusterRole", "flannel", "u-flannel-cr").objectRef,
			obj(crds, "CustomResourceDefinition", "network-attachment-definitions.k8s.cni.cncf.io", "u-nad").objectRef,
		},
		Unlisted: []string{"metrics.k8s.io/v1beta1"},
	}
	st := &apiState{
		Namespaces: []clusterObject{
			ns("default", "u-default"), ns("kube-system", "u-kube-system"), ns("kube-flannel", "u-flannel"),
			// kube-apiserver's own, made after the baseline: never deleted.
			ns("kube-node-lease", "u-new-lease"),
			ns("job-1", "u-job-1"),
			terminating(ns("job-0", "u-job-0")),
			// Deleted and made again by a job: its content is the job's.
			ns("gone-lane-ns", "u-gone-again"),
		},
		Objects: []clusterObject{
			obj(clusterRoles, "ClusterRole", "multus", "u-multus"),
			// Re-applied by a job under the same name: the lane needs it.
			obj(clusterRoles, "ClusterRole", "flannel", "u-flannel-cr-2"),
			obj(clusterRoles, "ClusterRole", "job-reader", "u-job-reader"),
			obj(clusterRoles, "ClusterRole", "system:controller:new", "u-sys"),
			obj("rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding", "job-reader", "u-job-crb"),
			obj("scheduling.k8s.io/v1/priorityclasses", "PriorityClass", "system-node-critical", "u-pc-sys"),
			obj("scheduling.k8s.io/v1/priorityclasses", "PriorityClass", "job-high", "u-pc-job"),
			obj("/v1/nodes", "Node", "k3d-sriov-agent-0", "u-node-again"),
			obj("certificates.k8s.io/v1/certificatesigningrequests", "CertificateSigningRequest", "csr-x", "u-csr"),
			obj("k3s.cattle.io/v1/etcdsnapshotfiles", "ETCDSnapshotFile", "snap", "u-snap"),
			obj("crd.projectcalico.org/v1/ipamhandles", "IPAMHandle", "k8s-pod-network.x", "u-handle"),
			withLabels(obj("apiregistration.k8s.io/v1/apiservices", "APIService", "v1.kubevirt.io", "u-as-crd"), apiServiceManagedLabel, "true"),
			obj("apiregistration.k8s.io/v1/apiservices", "APIService", "v1.subresources.kubevirt.io", "u-as-agg"),
			obj("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "ValidatingWebhookConfiguration", "virt-api-validator", "u-vwc"),
			obj(crds, "CustomResourceDefinition", "network-attachment-definitions.k8s.cni.cncf.io", "u-nad"),
			obj(crds, "CustomResourceDefinition", "kubevirts.kubevirt.io", "u-crd-kv"),
			terminating(obj(crds, "CustomResourceDefinition", "olds.example.com", "u-crd-old")),
			// Cluster-scoped custom resources: those of a CRD that goes, go with it.
			obj("kubevirt.io/v1/kubevirts", "KubeVirt", "cluster-wide", "u-kv-cr"),
			obj("example.com/v1/olds", "Old", "o1", "u-old-cr"),
			obj("k8s.cni.cncf.io/v1/clusterthings", "ClusterThing", "t1", "u-thing"),
			// Not read for the baseline: nothing to tell it by.
			obj("metrics.k8s.io/v1beta1/nodemetrics", "NodeMetrics", "m", "u-metrics"),
		},
		ListErrors: map[schema.GroupVersionResource]error{
			{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}: errors.New("conversion webhook down"),
		},
	}
	p := planReset(b, st)
	check := func(what string, got []clusterObject, want ...string) {
		t.Helper()
		slices.Sort(want)
		if g := names(got); !slices.Equal(g, want) {
			t.Errorf("%s: %q, want %q", what, g, want)
		}
	}
	check("blockers", p.Blockers, "APIService v1.subresources.kubevirt.io", "ValidatingWebhookConfiguration virt-api-validator")
	check("namespaces", p.Namespaces, "namespace gone-lane-ns", "namespace job-1")
	check("objects", p.Objects, "ClusterRole job-reader", "ClusterRoleBinding job-reader", "PriorityClass job-high", "ClusterThing t1")
	check("CRDs", p.CRDs, "CustomResourceDefinition kubevirts.kubevirt.io")
	check("terminating", p.Terminating, "namespace job-0", "CustomResourceDefinition olds.example.com")
	check("replaced", p.Replaced, "ClusterRole flannel")
	if len(p.Lost) != 1 || !strings.Contains(p.Lost[0], "gone-lane-ns") {
		t.Errorf("lost %q: want the baseline namespace a job deleted", p.Lost)
	}
	if err := p.unreadableErr(); err != nil {
		t.Errorf("a type whose CRD goes need not be read: %v", err)
	}

	// Deletes in order: what blocks first, CRDs last.
	var order []string
	for _, o := range p.deletes() {
		order = append(order, o.Resource)
	}
	if first, last := order[0], order[len(order)-1]; first != "apiservices" && first != "validatingwebhookconfigurations" || last != "customresourcedefinitions" {
		t.Errorf("delete order %v: want blockers first, CRDs last", order)
	}
	if i, j := slices.Index(order, "namespaces"), slices.Index(order, "clusterroles"); i < 0 || j < i {
		t.Errorf("delete order %v: want namespaces before the other objects", order)
	}

	// What to wait for: everything deleted or already going.
	nsWait, objWait := p.waitFor(p.deletes())
	if len(nsWait) != 3 || len(objWait) != len(p.deletes())-2+1 {
		t.Errorf("waits for namespaces %v and objects %v", nsWait, objWait)
	}
	for _, r := range nsWait {
		if !r.isNamespace() {
			t.Errorf("%s among the namespaces to wait for", r)
		}
	}
}

// A type reset cannot list makes it refuse to act: a lane that only looks
// reset is worse than a failed reset.
func TestPlanResetRefusesWhatItCannotRead(t *testing.T) {
	st := &apiState{ListErrors: map[schema.GroupVersionResource]error{
		{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}: errors.New("boom"),
	}}
	p := planReset(&Baseline{Version: baselineVersion}, st)
	if err := p.unreadableErr(); err == nil || !strings.Contains(err.Error(), "storageclasses") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("unreadable type: %v", err)
	}
}

// What k3s deploys before up's baseline stays through a reset: its CRDs,
// the default StorageClass, the packaged components' RBAC and the
// RuntimeClasses, also when k3s made one again (a server restart after a
// job deleted it); an ETCDSnapshotFile k3s writes after the baseline stays
// by rule. What a job made of the same types goes.
func TestPlanResetKeepsWhatK3sDeploys(t *testing.T) {
	const (
		storageClasses = "storage.k8s.io/v1/storageclasses"
		runtimeClasses = "node.k8s.io/v1/runtimeclasses"
		crbs           = "rbac.authorization.k8s.io/v1/clusterrolebindings"
	)
	k3s := []clusterObject{
		obj(crds, "CustomResourceDefinition", "addons.k3s.cattle.io", "u-addons"),
		obj(crds, "CustomResourceDefinition", "etcdsnapshotfiles.k3s.cattle.io", "u-snaps"),
		obj(crds, "CustomResourceDefinition", "helmcharts.helm.cattle.io", "u-hc"),
		obj(crds, "CustomResourceDefinition", "helmchartconfigs.helm.cattle.io", "u-hcc"),
		obj(storageClasses, "StorageClass", "local-path", "u-sc"),
		obj(clusterRoles, "ClusterRole", "local-path-provisioner-role", "u-lpp-cr"),
		obj(crbs, "ClusterRoleBinding", "local-path-provisioner-bind", "u-lpp-crb"),
		obj(clusterRoles, "ClusterRole", "system:coredns", "u-dns-cr"),
		obj(clusterRoles, "ClusterRole", "k3s-cloud-controller-manager", "u-ccm"),
		obj(crbs, "ClusterRoleBinding", "kube-apiserver-kubelet-admin", "u-kubelet-admin"),
		obj(runtimeClasses, "RuntimeClass", "nvidia", "u-rc-nvidia"),
	}
	b := &Baseline{Version: baselineVersion, Namespaces: []objectRef{ns("kube-system", "u-ks").objectRef}}
	for _, o := range k3s {
		b.Objects = append(b.Objects, o.objectRef)
	}
	now := slices.Clone(k3s)
	// A job deleted the StorageClass and k3s applied its manifest again.
	now[4] = obj(storageClasses, "StorageClass", "local-path", "u-sc-again")
	now = append(now,
		obj("k3s.cattle.io/v1/etcdsnapshotfiles", "ETCDSnapshotFile", "etcd-snapshot-k3d-sriov-server-0-1", "u-snap-file"),
		obj(storageClasses, "StorageClass", "job-fast", "u-sc-job"),
		obj(runtimeClasses, "RuntimeClass", "job-kata", "u-rc-job"),
		obj("/v1/persistentvolumes", "PersistentVolume", "pvc-1234", "u-pv"),
	)
	p := planReset(b, &apiState{Namespaces: []clusterObject{ns("kube-system", "u-ks")}, Objects: now})
	if got, want := names(p.Objects), []string{"PersistentVolume pvc-1234", "RuntimeClass job-kata", "StorageClass job-fast"}; !slices.Equal(got, want) {
		t.Errorf("deletes %q, want %q", got, want)
	}
	if len(p.CRDs)+len(p.Blockers)+len(p.Namespaces)+len(p.Terminating) > 0 {
		t.Errorf("deletes k3s's CRDs or more: %+v", p)
	}
	if got := names(p.Replaced); !slices.Equal(got, []string{"StorageClass local-path"}) {
		t.Errorf("replaced %q: k3s's StorageClass made again must stay", got)
	}
}

// PersistentVolumes k3s's local-path-provisioner (or any dynamic
// provisioner) made for a job's claims are left to it: deleted by reset,
// they would never reach its Delete, and their directories would stay on
// the nodes. A PV bound to a claim in a namespace reset keeps stays; others
// go as before.
func TestPlanResetLeavesProvisionedPVsToTheirProvisioner(t *testing.T) {
	const pvs = "/v1/persistentvolumes"
	b := &Baseline{Version: baselineVersion, Namespaces: []objectRef{ns("default", "u-default").objectRef, ns("kube-system", "u-ks").objectRef}}
	st := &apiState{
		Namespaces: []clusterObject{ns("default", "u-default"), ns("kube-system", "u-ks"), ns("job-1", "u-job-1"), terminating(ns("job-0", "u-job-0"))},
		Objects: []clusterObject{
			obj(pvs, "PersistentVolume", "pvc-job-1", "u-1"),
			obj(pvs, "PersistentVolume", "pvc-job-0", "u-0"),
			obj(pvs, "PersistentVolume", "pvc-default", "u-d"),
			obj(pvs, "PersistentVolume", "retained", "u-r"),
			obj(pvs, "PersistentVolume", "static", "u-s"),
		},
		PVs: map[string]pvFacts{
			"pvc-job-1":   {ClaimNamespace: "job-1", Provisioned: true},
			"pvc-job-0":   {ClaimNamespace: "job-0", Provisioned: true},
			"pvc-default": {ClaimNamespace: "default", Provisioned: true},
			"retained":    {ClaimNamespace: "job-1"},
			"static":      {},
		},
	}
	p := planReset(b, st)
	if got, want := names(p.Provisioned), []string{"PersistentVolume pvc-job-0", "PersistentVolume pvc-job-1"}; !slices.Equal(got, want) {
		t.Errorf("left to the provisioner %q, want %q", got, want)
	}
	if got, want := names(p.Objects), []string{"PersistentVolume retained", "PersistentVolume static"}; !slices.Equal(got, want) {
		t.Errorf("deletes %q, want %q", got, want)
	}
	_, wait := p.waitFor(p.deletes())
	var waited []string
	for _, r := range wait {
		waited = append(waited, r.Name)
	}
	slices.Sort(waited)
	if want := []string{"pvc-job-0", "pvc-job-1", "retained", "static"}; !slices.Equal(waited, want) {
		t.Errorf("waits for %v, want %v", waited, want)
	}
}
