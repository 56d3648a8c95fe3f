package main

// k3s's packaged components, as a k3s v1.35.5+k3s1 server deploys them
// (the k3s release the lane's default image rancher/k3s:v1.35.5-k3s1
// holds). Each fact is cited at the k3s-io/k3s file at that tag, read at
// its commit 6a4781ad (a fork's snapshot holds the tag's tree: k3s-io/k3s
// itself is too big to fetch), or at the module version the tag's go.mod
// pins. The manifests' images are the tag's (scripts/airgap/image-list.txt
// names the same): CoreDNS 1.14.3, local-path-provisioner v0.0.36,
// busybox 1.37.0 for its helper pod.
//
//   - At start a server registers its CRDs (pkg/server/context.go@v1.35.5+k3s1
//     registerCRDs: k3s-io/api's Addon and ETCDSnapshotFile, and, unless
//     --disable-helm-controller, helm-controller's HelmChart and
//     HelmChartConfig), writes its manifests into
//     <data-dir>/server/manifests, leaving out every skipped one
//     (pkg/server/server.go@v1.35.5+k3s1 stageFiles, pkg/deploy/stage.go
//     Stage with the Skips), and creates kube-system/cluster-dns unless it
//     exists (setClusterDNSConfig, which logs "Cluster dns configmap has
//     been set successfully", or "... already exists": k3d waits for
//     "Cluster dns configmap" before it rewrites coredns.yaml).
//   - The deploy controller (pkg/deploy/controller.go@v1.35.5+k3s1) lists
//     that directory at once and every 15 s, following symlinked
//     directories; a file named after a --disable'd component is deleted
//     with every object it made and its Addon; dot files, files other than
//     .yaml/.yml/.json and those with a NAME.skip beside them are left
//     alone; a file whose mtime is not the one it had when last applied is
//     applied: an Addon kube-system/<name up to the first dot> tracks it
//     (spec.source, set before the Addon is first created, spec.checksum =
//     sha256 of the file, annotation addon.k3s.cattle.io/gvks), and its
//     objects carry wrangler's objectset annotations and hash label
//     (rancher/wrangler/v3 v3.4.0, which go.mod@v1.35.5+k3s1 pins,
//     pkg/apply/desiredset_apply.go GetLabelsAndAnnotations:
//     objectset.rio.cattle.io/id, owner-gvk, owner-name, owner-namespace;
//     objectSetHash = sha1 of those in hashOrder); objects of the set no
//     longer in the file are deleted.
//   - The node controller (pkg/node/controller.go@v1.35.5+k3s1; its CoreDNS
//     share is on unless coredns is skipped) keeps an "IP names" line per
//     InternalIP of each node in the coredns ConfigMap's NodeHosts
//     (nodeHosts).
//
// What the stand-in does differently, and why:
//
//   - It applies with server-side apply where wrangler keeps its own
//     three-way patch in objectset.rio.cattle.io/applied: the objects and
//     their fields are the same; the applied annotation is not written.
//   - It records no Events for the Addons.
//   - HelmChart, HelmChartConfig and ETCDSnapshotFile keep unknown fields
//     (x-kubernetes-preserve-unknown-fields) where helm-controller's and
//     k3s-io/api's generated schemas type them: the stand-in runs neither
//     helm-controller nor etcd snapshots, nothing in a lane writes those
//     objects, and only their types' presence matters (discovery, reset).
//   - It packages no traefik, servicelb or metrics-server: a server without
//     --disable for each of them refuses to start, instead of running
//     without what k3s would deploy.
//   - Its manifests are rendered from Go types: the objects are the
//     manifests', but the files' text is not, and a zero one leaves out the
//     other may spell out (the stand-in's Service ports have targetPort: 0,
//     which the API server defaults to the port; k3s's readiness probe has
//     initialDelaySeconds: 0, the stand-in's none).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

const (
	manifestsDir = "/var/lib/rancher/k3s/server/manifests"
	// defaultLocalStoragePath is k3s's --default-local-storage-path:
	// <data-dir>/storage (k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1).
	defaultLocalStoragePath = "/var/lib/rancher/k3s/storage"

	// k3s v1.35.5+k3s1's images (the release's airgap image list), as its
	// manifests name them: %{SYSTEM_DEFAULT_REGISTRY}% is empty.
	corednsImage         = "rancher/mirrored-coredns-coredns:1.14.3"
	localPathImage       = "rancher/local-path-provisioner:v0.0.36"
	localPathHelperImage = "rancher/mirrored-library-busybox:1.37.0"

	addonGVKAnnotation = "addon.k3s.cattle.io/gvks"
	objectsetID        = "objectset.rio.cattle.io/id"
	objectsetOwnerGVK  = "objectset.rio.cattle.io/owner-gvk"
	objectsetOwnerName = "objectset.rio.cattle.io/owner-name"
	objectsetOwnerNS   = "objectset.rio.cattle.io/owner-namespace"
	objectsetHash      = "objectset.rio.cattle.io/hash"

	deployInterval  = 15 * time.Second
	crdPoll         = 100 * time.Millisecond
	nodeHostsRelist = time.Second
)

var addonGVR = schema.GroupVersionResource{Group: "k3s.cattle.io", Version: "v1", Resource: "addons"}

// unpackaged are the components k3s would deploy that the stand-in has
// not got.
var unpackaged = []string{"traefik", "servicelb", "metrics-server"}

// packaged is what runServer needs of this file.
type packaged struct {
	disabled      map[string]bool
	clusterDNS    []string // one address per service CIDR, the first first
	clusterDomain string
	dir           string
	// clusterDNSLine is what k3s logs of kube-system/cluster-dns once start
	// made it or found it.
	clusterDNSLine string
}

// newPackaged checks the server's --disable list before anything starts.
func newPackaged(f k3sFlags) (*packaged, error) {
	p := &packaged{disabled: map[string]bool{}, dir: manifestsDir}
	for _, d := range f.disable {
		p.disabled[d] = true
	}
	var missing []string
	for _, c := range unpackaged {
		if !p.disabled[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the stand-in k3s packages no %s: run it with --disable=%s", strings.Join(missing, ", "), strings.Join(missing, " --disable="))
	}
	return p, nil
}

// start does a k3s server's start-up share: the CRDs, the manifests, the
// cluster-dns ConfigMap, then the deploy and node controllers in the
// background. It returns once the first three are in place.
func (p *packaged) start(ctx context.Context, cfg *rest.Config, clusterDNS []string, clusterDomain string) error {
	p.clusterDNS, p.clusterDomain = clusterDNS, clusterDomain
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := registerCRDs(ctx, dyn); err != nil {
		return fmt.Errorf("registering k3s's CRDs: %w", err)
	}
	if err := p.stage(); err != nil {
		return err
	}
	if p.clusterDNSLine, err = setClusterDNS(ctx, cs, clusterDNS[0], clusterDomain); err != nil {
		return err
	}
	go newDeployer(cs, dyn, p.disabled).run(ctx, p.dir)
	if !p.disabled["coredns"] {
		go keepNodeHosts(ctx, cs)
	}
	return nil
}

// manifests are k3s's default manifest files, by file name, for the
// server's settings.
func (p *packaged) manifests() map[string][]runtime.Object {
	return map[string][]runtime.Object{
		"ccm.yaml":           ccmObjects(),
		"coredns.yaml":       corednsObjects(p.clusterDNS, p.clusterDomain),
		"local-storage.yaml": localStorageObjects(defaultLocalStoragePath),
		"rolebindings.yaml":  rolebindingObjects(),
		"runtimes.yaml":      runtimeClassObjects(),
	}
}

// stage writes every manifest not skipped, as deploy.Stage does: on each
// start, over what is there (k3d rewrites coredns.yaml after that). A
// --disable item skips a file named by it with or without its extension
// (k3s-io/k3s pkg/deploy/stage.go@v1.35.5+k3s1, read at 6a4781ad).
func (p *packaged) stage() error {
	for name, objs := range p.manifests() {
		if p.disabled[name] || p.disabled[strings.TrimSuffix(name, filepath.Ext(name))] {
			continue
		}
		b, err := renderManifest(objs)
		if err != nil {
			return fmt.Errorf("rendering %s: %w", name, err)
		}
		path := filepath.Join(p.dir, name)
		if err := writeFile(path, b, 0o600); err != nil {
			return fmt.Errorf("writing manifest %s: %w", path, err)
		}
		logf("Writing manifest: %s", path)
	}
	return nil
}

// renderManifest is one YAML document per object.
func renderManifest(objs []runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u, "status")
		if spec, ok := u["spec"].(map[string]any); ok {
			if tmpl, ok := spec["template"].(map[string]any); ok {
				unstructured.RemoveNestedField(tmpl, "metadata", "creationTimestamp")
			}
		}
		b, err := yaml.Marshal(u)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func systemMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}
}

// tolerations of k3s's packaged Deployments: they run on servers tainted
// CriticalAddonsOnly or control-plane NoSchedule, and no others (the
// node-role.kubernetes.io/master toleration is gone from both
// manifests/coredns.yaml and manifests/local-storage.yaml@v1.35.5+k3s1).
func packagedTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
}

// packagedDeployment is a Deployment of k3s's packaged components: no old
// ReplicaSets kept, one pod unavailable at a time while it rolls, its pods
// selected by labels and on tainted servers too (packagedTolerations).
func packagedDeployment(meta metav1.ObjectMeta, labels map[string]string, pod corev1.PodSpec) *appsv1.Deployment {
	one := intstr.FromInt32(1)
	pod.Tolerations = packagedTolerations()
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			RevisionHistoryLimit: ptr(int32(0)),
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one}},
			Selector:             &metav1.LabelSelector{MatchLabels: labels},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// corednsObjects are k3s-io/k3s manifests/coredns.yaml@v1.35.5+k3s1's
// (read at 6a4781ad) for the cluster DNS addresses: the Service's
// ipFamilyPolicy is SingleStack unless there are two (pkg/server/server.go
// stageFiles). In the Corefile forward comes last, after the import of
// *.override, so an override's plugins run before it; the pods spread
// over hosts (required) and zones (preferred).
func corednsObjects(clusterDNS []string, clusterDomain string) []runtime.Object {
	labels := map[string]string{"k8s-app": "kube-dns"}
	corefile := strings.Join([]string{
		".:53 {",
		"    errors",
		"    health",
		"    ready",
		"    kubernetes " + clusterDomain + " in-addr.arpa ip6.arpa {",
		"      pods insecure",
		"      fallthrough in-addr.arpa ip6.arpa",
		"    }",
		"    hosts /etc/coredns/NodeHosts {",
		"      ttl 60",
		"      reload 15s",
		"      fallthrough",
		"    }",
		"    prometheus :9153",
		"    cache 30",
		"    loop",
		"    reload",
		"    loadbalance",
		"    import /etc/coredns/custom/*.override",
		"    forward . /etc/resolv.conf",
		"}",
		"import /etc/coredns/custom/*.server",
		"",
	}, "\n")
	probe := func(path string, port int32, initial, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: initial, PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	return []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: systemMeta("coredns")},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
				Annotations: map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: metav1.NamespaceSystem}},
		},
		// No NodeHosts: the node controller and k3d add it, and the pod
		// waits for the key until then.
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: systemMeta("coredns"), Data: map[string]string{"Corefile": corefile}},
		packagedDeployment(metav1.ObjectMeta{Name: "coredns", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}}, labels,
			corev1.PodSpec{
				PriorityClassName:  "system-cluster-critical",
				ServiceAccountName: "coredns",
				NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
					{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					},
					{
						MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					},
				},
				Containers: []corev1.Container{{
					Name:            "coredns",
					Image:           corednsImage,
					ImagePullPolicy: corev1.PullIfNotPresent,
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
					},
					Args: []string{"-conf", "/etc/coredns/Corefile"},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true},
						{Name: "custom-config-volume", MountPath: "/etc/coredns/custom", ReadOnly: true},
					},
					Ports: []corev1.ContainerPort{
						{ContainerPort: 53, Name: "dns", Protocol: corev1.ProtocolUDP},
						{ContainerPort: 53, Name: "dns-tcp", Protocol: corev1.ProtocolTCP},
						{ContainerPort: 9153, Name: "metrics", Protocol: corev1.ProtocolTCP},
					},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr(false),
						Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"all"}},
						ReadOnlyRootFilesystem:   ptr(true),
					},
					LivenessProbe:  probe("/health", 8080, 60, 10),
					ReadinessProbe: probe("/ready", 8181, 0, 2),
				}},
				DNSPolicy: corev1.DNSDefault,
				Volumes: []corev1.Volume{
					{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}, {Key: "NodeHosts", Path: "NodeHosts"}},
					}}},
					{Name: "custom-config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "coredns-custom"},
						Optional:             ptr(true),
					}}},
				},
			}),
		&corev1.Service{
			TypeMeta: typeMeta("v1", "Service"),
			ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem,
				Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
				Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
			Spec: corev1.ServiceSpec{
				Selector:       labels,
				ClusterIP:      clusterDNS[0],
				ClusterIPs:     clusterDNS,
				IPFamilyPolicy: ptr(dnsFamilyPolicy(clusterDNS)),
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
				},
			},
		},
	}
}

// localStorageObjects are k3s-io/k3s manifests/local-storage.yaml@v1.35.5+k3s1's
// (read at 6a4781ad): local-path-provisioner on Linux nodes, its config
// (every node's volumes under storagePath), the helper pod's scripts and
// the default StorageClass local-path. The ConfigMap's values are the
// manifest's text as written there (block scalars with "|-": no final
// newline), %{DEFAULT_LOCAL_STORAGE_PATH}% replaced and
// %{SYSTEM_DEFAULT_REGISTRY}% empty.
func localStorageObjects(storagePath string) []runtime.Object {
	labels := map[string]string{"app": "local-path-provisioner"}
	const sa = "local-path-provisioner-service-account"
	// Each script makes or removes the volume's directory the provisioner
	// passes in VOL_DIR (setup also closes the parent to others).
	setup := "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"${VOL_DIR}\"\nchmod 700 \"${VOL_DIR}/..\""
	teardown := "#!/bin/sh\nset -eu\nrm -rf \"${VOL_DIR}\""
	helper := strings.Join([]string{
		"apiVersion: v1",
		"kind: Pod",
		"metadata:",
		"  name: helper-pod",
		"spec:",
		"  containers:",
		"  - name: helper-pod",
		`    image: "` + localPathHelperImage + `"`,
		"    imagePullPolicy: IfNotPresent",
	}, "\n")
	config := strings.Join([]string{
		"{",
		`  "nodePathMap":[`,
		"  {",
		`    "node":"DEFAULT_PATH_FOR_NON_LISTED_NODES",`,
		`    "paths":["` + storagePath + `"]`,
		"  }",
		"  ]",
		"}",
	}, "\n")
	return []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: systemMeta(sa)},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: "local-path-provisioner-role"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes", "persistentvolumeclaims", "configmaps", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"endpoints", "persistentvolumes", "pods"}, Verbs: []string{"*"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: "local-path-provisioner-bind"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "local-path-provisioner-role"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: metav1.NamespaceSystem}},
		},
		packagedDeployment(systemMeta("local-path-provisioner"), labels, corev1.PodSpec{
			PriorityClassName:  "system-node-critical",
			ServiceAccountName: sa,
			NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
			Containers: []corev1.Container{{
				Name:            "local-path-provisioner",
				Image:           localPathImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"local-path-provisioner", "start", "--config", "/etc/config/config.json"},
				VolumeMounts:    []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/config/"}},
				Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"},
				}}},
			}},
			Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "local-path-config"},
			}}}},
		}),
		&storagev1.StorageClass{
			TypeMeta: typeMeta("storage.k8s.io/v1", "StorageClass"),
			ObjectMeta: metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{
				"defaultVolumeType": "local", "storageclass.kubernetes.io/is-default-class": "true",
			}},
			Provisioner:       "rancher.io/local-path",
			VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer),
			ReclaimPolicy:     ptr(corev1.PersistentVolumeReclaimDelete),
		},
		&corev1.ConfigMap{
			TypeMeta:   typeMeta("v1", "ConfigMap"),
			ObjectMeta: systemMeta("local-path-config"),
			Data:       map[string]string{"config.json": config, "setup": setup, "teardown": teardown, "helperPod.yaml": helper},
		},
	}
}

// ccmObjects are k3s-io/k3s manifests/ccm.yaml@v1.35.5+k3s1's (read at
// 6a4781ad): the RBAC of k3s's embedded cloud-controller-manager, which
// runs as User k3s-cloud-controller-manager: its ClusterRole, the
// binding to it, system:auth-delegator (to check the tokens of those who
// call it) and kube-system's extension-apiserver-authentication-reader
// Role (to read the client CA). k3s stages ccm.yaml unless "ccm" is
// skipped, which --disable=ccm does, and also --disable-cloud-controller
// together with --disable=servicelb (pkg/cli/server/server.go@v1.35.5+k3s1);
// the stand-in takes the first and refuses --disable-cloud-controller as a
// flag it does not know.
func ccmObjects() []runtime.Object {
	core := func(resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: verbs}
	}
	ccm := []rbacv1.Subject{{Kind: "User", Name: "k3s-cloud-controller-manager", Namespace: metav1.NamespaceSystem}}
	return []runtime.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: "k3s-cloud-controller-manager"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
				core([]string{"events"}, "create", "patch", "update"),
				core([]string{"nodes"}, "*"),
				core([]string{"nodes/status", "services/status"}, "patch"),
				core([]string{"services", "pods"}, "get", "list", "watch"),
				core([]string{"services"}, "patch", "update"),
				core([]string{"serviceaccounts"}, "create", "get"),
				core([]string{"namespaces"}, "create", "get"),
				{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"*"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: "k3s-cloud-controller-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "k3s-cloud-controller-manager"},
			Subjects:   ccm,
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: "k3s-cloud-controller-manager-auth-delegator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   ccm,
		},
		&rbacv1.RoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: systemMeta("k3s-cloud-controller-manager-authentication-reader"),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects:   ccm,
		},
	}
}

// rolebindingObjects are k3s-io/k3s manifests/rolebindings.yaml@v1.35.5+k3s1's
// (read at 6a4781ad): kube-apiserver may use kubelets' API (logs, exec);
// k3s's own controllers, as User system:k3s-controller, may read nodes,
// namespaces, network policies, endpoints, pods and EndpointSlices and
// patch node status; every node may list ClusterCIDRs.
func rolebindingObjects() []runtime.Object {
	clusterRoleBinding := func(name, role string, subject rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}
	}
	clusterRole := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	rule := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	return []runtime.Object{
		clusterRoleBinding("kube-apiserver-kubelet-admin", "system:kubelet-api-admin",
			rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "kube-apiserver"}),
		clusterRole("system:k3s-controller",
			rule("", []string{"nodes"}, "get", "list", "watch"),
			rule("", []string{"nodes/status"}, "patch"),
			rule("", []string{"namespaces"}, "list", "watch"),
			rule("networking.k8s.io", []string{"networkpolicies", "clustercidrs"}, "list", "watch"),
			rule("", []string{"endpoints", "pods"}, "list", "get", "watch"),
			rule("discovery.k8s.io", []string{"endpointslices"}, "list", "get", "watch")),
		clusterRoleBinding("system:k3s-controller", "system:k3s-controller",
			rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:k3s-controller"}),
		clusterRole("clustercidrs-node", rule("networking.k8s.io", []string{"clustercidrs"}, "list", "watch")),
		clusterRoleBinding("clustercidrs-node", "clustercidrs-node",
			rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:nodes"}),
	}
}

// runtimeClassObjects are k3s-io/k3s manifests/runtimes.yaml@v1.35.5+k3s1's
// (read at 6a4781ad): one RuntimeClass per runtime k3s configures
// containerd for when present.
func runtimeClassObjects() []runtime.Object {
	var out []runtime.Object
	for _, h := range []string{"nvidia", "nvidia-experimental", "crun", "lunatic", "slight", "spin", "wws", "wasmedge", "wasmer", "wasmtime"} {
		out = append(out, &nodev1.RuntimeClass{TypeMeta: typeMeta("node.k8s.io/v1", "RuntimeClass"), ObjectMeta: metav1.ObjectMeta{Name: h}, Handler: h})
	}
	return out
}

// k3sCRDs are the CRDs a server registers at start (k3s-io/k3s
// pkg/server/context.go@v1.35.5+k3s1 registerCRDs: k3s-io/api's and
// helm-controller's crds.List, at the versions go.mod@v1.35.5+k3s1 pins).
// k3s-io/api v0.1.4 pkg/crds/yaml/generated/k3s.cattle.io_{addons,etcdsnapshotfiles}.yaml:
// Addon namespaced with spec.source and spec.checksum, ETCDSnapshotFile
// cluster-scoped. helm-controller v0.17.1
// pkg/crds/yaml/generated/helm.cattle.io_{helmcharts,helmchartconfigs}.yaml:
// both namespaced, short names hc and hcc, HelmChart with a status
// subresource. Names, scopes, printer columns, subresources and
// controller-gen's annotation are theirs; the schemas other than Addon's
// keep unknown fields (see the file's comment).
func k3sCRDs() []*unstructured.Unstructured {
	str := map[string]any{"type": "string"}
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := func(group, kind, plural, scope, generator string, shortNames []string, columns []any, subresources map[string]any, props map[string]any) *unstructured.Unstructured {
		names := map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)}
		if len(shortNames) > 0 {
			var sn []any
			for _, s := range shortNames {
				sn = append(sn, s)
			}
			names["shortNames"] = sn
		}
		props["apiVersion"], props["kind"], props["metadata"] = str, str, map[string]any{"type": "object"}
		version := map[string]any{
			"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": props}},
		}
		if len(columns) > 0 {
			version["additionalPrinterColumns"] = columns
		}
		if subresources != nil {
			version["subresources"] = subresources
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + "." + group,
				"annotations": map[string]any{"controller-gen.kubebuilder.io/version": generator}},
			"spec": map[string]any{"group": group, "names": names, "scope": scope, "versions": []any{version}},
		}}
	}
	col := func(name, path, typ string) map[string]any {
		return map[string]any{"name": name, "jsonPath": path, "type": typ}
	}
	job := col("Job", ".status.jobName", "string")
	job["priority"] = int64(10)
	return []*unstructured.Unstructured{
		crd("k3s.cattle.io", "Addon", "addons", "Namespaced", "v0.17.3", nil,
			[]any{col("Source", ".spec.source", "string"), col("Checksum", ".spec.checksum", "string")}, map[string]any{},
			map[string]any{"spec": map[string]any{"type": "object", "properties": map[string]any{"source": str, "checksum": str}}}),
		crd("k3s.cattle.io", "ETCDSnapshotFile", "etcdsnapshotfiles", "Cluster", "v0.17.3", nil,
			[]any{col("SnapshotName", ".spec.snapshotName", "string"), col("Node", ".spec.nodeName", "string"), col("Location", ".spec.location", "string"),
				col("Size", ".status.size", "string"), col("CreationTime", ".status.creationTime", "date")}, map[string]any{},
			map[string]any{"spec": open, "status": open}),
		crd("helm.cattle.io", "HelmChart", "helmcharts", "Namespaced", "v0.19.0", []string{"hc"},
			[]any{col("Repo", ".spec.repo", "string"), col("Chart", ".spec.chart", "string"), col("Version", ".spec.version", "string"),
				col("TargetNamespace", ".spec.targetNamespace", "string"), col("Bootstrap", ".spec.bootstrap", "boolean"),
				col("Failed", ".status.conditions[?(@.type=='Failed')].status", "string"), job},
			map[string]any{"status": map[string]any{}},
			map[string]any{"spec": open, "status": open}),
		crd("helm.cattle.io", "HelmChartConfig", "helmchartconfigs", "Namespaced", "v0.19.0", []string{"hcc"}, nil, nil,
			map[string]any{"spec": open}),
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// registerCRDs creates (or updates) k3s's CRDs and waits until they are
// established, as wrangler's BatchCreateCRDs and BatchWait do.
func registerCRDs(ctx context.Context, dyn dynamic.Interface) error {
	client := dyn.Resource(crdGVR)
	for _, c := range k3sCRDs() {
		_, err := client.Apply(ctx, c.GetName(), c, metav1.ApplyOptions{FieldManager: "k3s", Force: true})
		if err != nil {
			return fmt.Errorf("%s: %w", c.GetName(), err)
		}
	}
	for _, c := range k3sCRDs() {
		err := wait.PollUntilContextCancel(ctx, crdPoll, true, func(ctx context.Context) (bool, error) {
			got, err := client.Get(ctx, c.GetName(), metav1.GetOptions{})
			return err == nil && crdEstablished(got), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s to be established: %w", c.GetName(), err)
		}
	}
	return nil
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// setClusterDNS creates kube-system/cluster-dns unless it exists, and
// returns the line k3s's setClusterDNSConfig logs for either (k3s-io/k3s
// pkg/server/server.go@v1.35.5+k3s1, read at 6a4781ad).
func setClusterDNS(ctx context.Context, cs kubernetes.Interface, clusterDNS, clusterDomain string) (string, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: systemMeta("cluster-dns"),
		Data:       map[string]string{"clusterDNS": clusterDNS, "clusterDomain": clusterDomain},
	}
	_, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return "Cluster dns configmap already exists", nil
	case err != nil:
		return "", fmt.Errorf("creating the cluster-dns ConfigMap: %w", err)
	}
	return "Cluster dns configmap has been set successfully", nil
}

// deployer is k3s's deploy controller over one directory.
type deployer struct {
	dyn      dynamic.Interface
	mapper   meta.ResettableRESTMapper
	disabled map[string]bool
	modTime  map[string]time.Time
	lastErr  string
}

func newDeployer(cs kubernetes.Interface, dyn dynamic.Interface, disabled map[string]bool) *deployer {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	return &deployer{dyn: dyn, mapper: mapper, disabled: disabled, modTime: map[string]time.Time{}}
}

func (d *deployer) run(ctx context.Context, dir string) {
	force := true
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := d.pass(ctx, dir, force); err != nil {
			logOnce(&d.lastErr, fmt.Sprintf("Failed to process config: %v", err))
		} else {
			force = false
			d.lastErr = ""
		}
	}, deployInterval)
}

// pass is one listing of dir, as k3s's watcher.listFilesIn makes it
// (k3s-io/k3s pkg/deploy/controller.go@v1.35.5+k3s1, read at 6a4781ad):
// disabled files go with their objects, changed ones (all of them when
// force) are applied.
func (d *deployer) pass(ctx context.Context, dir string, force bool) error {
	files, err := manifestFiles(dir)
	if err != nil {
		return err
	}
	skips := map[string]bool{}
	var paths []string
	for path, info := range files {
		if strings.HasSuffix(info.Name(), ".skip") {
			skips[strings.TrimSuffix(info.Name(), ".skip")] = true
		}
		paths = append(paths, path)
	}
	sort.Strings(paths)
	var errs []error
	for _, path := range paths {
		// Directories too, as k3s: one named like a manifest is deployed,
		// and reading it fails.
		info := files[path]
		if disabledFile(dir, path, d.disabled) {
			if err := d.remove(ctx, path); err != nil {
				errs = append(errs, fmt.Errorf("failed to delete %s: %w", path, err))
			}
			continue
		}
		if skipFile(info.Name(), skips) {
			continue
		}
		if !d.changed(path, info, force) {
			continue
		}
		if err := d.deploy(ctx, path, !force); err != nil {
			errs = append(errs, fmt.Errorf("failed to process %s: %w", path, err))
			continue
		}
		d.modTime[path] = info.ModTime()
	}
	return errors.Join(errs...)
}

// changed: a file is applied when forced or when its mtime is not the one
// it had when last applied, whatever that mtime is (k3d's rewrite of
// coredns.yaml has the Unix epoch: its tar header has no ModTime).
func (d *deployer) changed(path string, info os.FileInfo, force bool) bool {
	return force || !info.ModTime().Equal(d.modTime[path])
}

// manifestFiles is every file and directory under base, each by its path,
// with what Lstat says of it. A symlink to a directory met on the way is
// also followed: what is under the directory it resolves to is listed by
// that path, without following the links in there; an error in there is
// passed over, one resolving the link is not (k3s's listFilesIn).
func manifestFiles(base string) (map[string]os.FileInfo, error) {
	files := map[string]os.FileInfo{}
	err := filepath.Walk(base, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			linkInfo, err := os.Stat(path)
			if err != nil {
				return err
			}
			if linkInfo.IsDir() {
				evalPath, err := filepath.EvalSymlinks(path)
				if err != nil {
					return err
				}
				_ = filepath.Walk(evalPath, func(path string, info os.FileInfo, err error) error {
					if err != nil {
						return err
					}
					files[path] = info
					return nil
				})
			}
		}
		files[path] = info
		return nil
	})
	return files, err
}

func isManifest(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json")
}

func skipFile(name string, skips map[string]bool) bool {
	return strings.HasPrefix(name, ".") || skips[name] || !isManifest(name)
}

// disabledFile is k3s's shouldDisableFile: a file under a directory whose
// path from base names a disabled component, or a manifest whose name
// less its extension is one. The path is cut at base as text, so each
// starts with an empty element, and one outside base (from a symlinked
// directory) is taken whole: --disable with an empty item (",") disables
// every file.
func disabledFile(base, path string, disabled map[string]bool) bool {
	rel := strings.Split(strings.TrimPrefix(path, base), string(os.PathSeparator))
	for i := 1; i < len(rel); i++ {
		if disabled[filepath.Join(rel[:i]...)] {
			return true
		}
	}
	if !isManifest(path) {
		return false
	}
	b := filepath.Base(path)
	return disabled[strings.TrimSuffix(b, filepath.Ext(b))]
}

// addonName is the file's name up to its first dot.
func addonName(path string) string {
	n, _, _ := strings.Cut(filepath.Base(path), ".")
	return n
}

// objectsetLabels are what wrangler's apply stamps on an Addon's objects.
func objectsetLabels(addon string) (annotations map[string]string, hash string) {
	annotations = map[string]string{
		objectsetID: "", objectsetOwnerGVK: "k3s.cattle.io/v1, Kind=Addon", objectsetOwnerName: addon, objectsetOwnerNS: metav1.NamespaceSystem,
	}
	h := sha1.New()
	for _, k := range []string{objectsetID, objectsetOwnerGVK, objectsetOwnerName, objectsetOwnerNS} {
		h.Write([]byte(annotations[k]))
	}
	return annotations, hex.EncodeToString(h.Sum(nil))
}

// addon is the file's Addon, or a new one, unsaved, when it has none, as
// getOrCreateAddon returns it.
func (d *deployer) addon(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	a, err := d.dyn.Resource(addonGVR).Namespace(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k3s.cattle.io/v1", "kind": "Addon",
			"metadata": map[string]any{"name": name, "namespace": metav1.NamespaceSystem},
		}}, nil
	}
	return a, err
}

// deploy applies one manifest file and records it in its Addon. As k3s's
// deploy does, the Addon's spec.source is the file's path before anything
// else, and a new Addon is created with it before the file is read (k3s
// records its events on it), so a file that cannot be read or parsed
// leaves an Addon with its source and no checksum.
func (d *deployer) deploy(ctx context.Context, path string, compareChecksum bool) error {
	addon, err := d.addon(ctx, addonName(path))
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(addon.Object, path, "spec", "source"); err != nil {
		return err
	}
	if addon.GetUID() == "" {
		if addon, err = d.dyn.Resource(addonGVR).Namespace(metav1.NamespaceSystem).Create(ctx, addon, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(content)
	checksum := hex.EncodeToString(sum[:])
	have, _, _ := unstructured.NestedString(addon.Object, "spec", "checksum")
	if compareChecksum && have == checksum {
		return nil
	}
	objs, err := parseManifest(content)
	if err != nil {
		return err
	}
	annotations, hash := objectsetLabels(addonName(path))
	desired := map[string]bool{}
	var gvks []schema.GroupVersionKind
	for _, o := range objs {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for k, v := range annotations {
			a[k] = v
		}
		o.SetAnnotations(a)
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[objectsetHash] = hash
		o.SetLabels(l)
		ri, gvk, err := d.resource(o)
		if err != nil {
			return err
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "deploy", Force: ptr(true)}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		desired[objectKey(gvk, o.GetNamespace(), o.GetName())] = true
		if !slices.Contains(gvks, gvk) {
			gvks = append(gvks, gvk)
		}
	}
	// Objects the file made before and no longer holds go, as wrangler's
	// apply prunes its set.
	if err := d.prune(ctx, slices.Concat(gvks, addonGVKs(addon)), hash, desired); err != nil {
		return err
	}
	var gvkStrings []string
	for _, g := range gvks {
		gvkStrings = append(gvkStrings, g.String())
	}
	ann := addon.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[addonGVKAnnotation] = strings.Join(gvkStrings, ";")
	addon.SetAnnotations(ann)
	if err := unstructured.SetNestedField(addon.Object, checksum, "spec", "checksum"); err != nil {
		return err
	}
	_, err = d.dyn.Resource(addonGVR).Namespace(metav1.NamespaceSystem).Update(ctx, addon, metav1.UpdateOptions{})
	return err
}

// remove deletes what a disabled component's file made, the file and its
// Addon.
func (d *deployer) remove(ctx context.Context, path string) error {
	name := addonName(path)
	addon, err := d.addon(ctx, name)
	if err != nil {
		return err
	}
	gvks := addonGVKs(addon)
	if content, err := os.ReadFile(path); err == nil {
		if objs, err := parseManifest(content); err == nil {
			for _, o := range objs {
				gvks = append(gvks, o.GroupVersionKind())
			}
		}
	}
	_, hash := objectsetLabels(name)
	if err := d.prune(ctx, gvks, hash, nil); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	logf("Deleting manifest at %q", path)
	err = d.dyn.Resource(addonGVR).Namespace(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func addonGVKs(addon *unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, s := range strings.Split(addon.GetAnnotations()[addonGVKAnnotation], ";") {
		gv, kind, ok := strings.Cut(s, ", Kind=")
		if !ok {
			continue
		}
		g, v, found := strings.Cut(gv, "/")
		if !found {
			g, v = "", gv
		}
		out = append(out, schema.GroupVersionKind{Group: g, Version: v, Kind: kind})
	}
	return out
}

func objectKey(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.GroupKind().String() + "/" + namespace + "/" + name
}

// prune deletes the objects of gvks labelled with the set's hash that are
// not desired. A type the server no longer serves is passed over.
func (d *deployer) prune(ctx context.Context, gvks []schema.GroupVersionKind, hash string, desired map[string]bool) error {
	seen := map[schema.GroupVersionKind]bool{}
	for _, gvk := range gvks {
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return err
		}
		list, err := d.dyn.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: objectsetHash + "=" + hash})
		if err != nil {
			return err
		}
		for _, it := range list.Items {
			if desired[objectKey(gvk, it.GetNamespace(), it.GetName())] {
				continue
			}
			var ri dynamic.ResourceInterface = d.dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = d.dyn.Resource(m.Resource).Namespace(it.GetNamespace())
			}
			if err := ri.Delete(ctx, it.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func (d *deployer) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, schema.GroupVersionKind, error) {
	gvk := o.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A type made since the mapper last looked (a CRD in an
		// earlier file).
		d.mapper.Reset()
		m, err = d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, gvk, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
			o.SetNamespace(ns)
		}
		return d.dyn.Resource(m.Resource).Namespace(ns), gvk, nil
	}
	return d.dyn.Resource(m.Resource), gvk, nil
}

// parseManifest reads every YAML (or JSON) document of a manifest; blank
// and comment-only documents are skipped, a List gives its items.
func parseManifest(content []byte) ([]*unstructured.Unstructured, error) {
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(content)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if emptyYAML(doc) {
			continue
		}
		js, err := k8syaml.ToJSON(doc)
		if err != nil {
			return nil, err
		}
		o, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, nil)
		if err != nil {
			return nil, err
		}
		switch v := o.(type) {
		case *unstructured.UnstructuredList:
			for i := range v.Items {
				out = append(out, &v.Items[i])
			}
		case *unstructured.Unstructured:
			out = append(out, v)
		}
	}
}

func emptyYAML(doc []byte) bool {
	for _, l := range bytes.Split(doc, []byte("\n")) {
		s := bytes.TrimSpace(l)
		if len(s) > 0 && string(s) != "---" && !bytes.HasPrefix(s, []byte("#")) {
			return false
		}
	}
	return true
}

// keepNodeHosts is k3s's node controller's CoreDNS share: every node's
// InternalIP and name in the coredns ConfigMap's NodeHosts, a removed
// node's line dropped. It watches Nodes, and lists again after a watch
// ends.
func keepNodeHosts(ctx context.Context, cs kubernetes.Interface) {
	var lastErr string
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				if err := updateNodeHosts(ctx, cs, &list.Items[i], false); err != nil {
					logOnce(&lastErr, fmt.Sprintf("updating coredns node hosts: %v", err))
				}
			}
			watcher, werr := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if werr == nil {
				for ev := range watcher.ResultChan() {
					n, ok := ev.Object.(*corev1.Node)
					if !ok {
						continue
					}
					if err := updateNodeHosts(ctx, cs, n, ev.Type == "DELETED"); err != nil {
						logOnce(&lastErr, fmt.Sprintf("updating coredns node hosts: %v", err))
					}
				}
				watcher.Stop()
			}
		}
	}, nodeHostsRelist)
}

// updateNodeHosts sets (or, removed, drops) node's entries in NodeHosts,
// as k3s's handler does (updateCoreDNSConfigMap, see nodeHosts): an
// entry per InternalIP family, named by the node and, where it differs, its
// Hostname address; a node with no InternalIP is left alone.
func updateNodeHosts(ctx context.Context, cs kubernetes.Interface, node *corev1.Node, removed bool) error {
	var n hostsNode
	n.name = node.Name
	hostName := ""
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			if strings.Contains(a.Address, ":") {
				n.ipv6 = a.Address
			} else {
				n.ipv4 = a.Address
			}
		case corev1.NodeHostName:
			hostName = a.Address
		}
	}
	if !removed && n.ipv4 == "" && n.ipv6 == "" {
		return nil
	}
	n.names = node.Name
	if hostName != node.Name {
		n.names += " " + hostName
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	hosts, changed := nodeHosts(cm.Data["NodeHosts"], n, removed)
	if !changed {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["NodeHosts"] = hosts
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	action := "Synced"
	if removed {
		action = "Removed"
	}
	logf("%s coredns NodeHosts entries for %s", action, node.Name)
	return nil
}

// hostsNode is what NodeHosts holds of a node: its InternalIP of each
// family ("" for none) and the names they resolve to.
type hostsNode struct{ name, names, ipv4, ipv6 string }

// nodeHosts is hosts with node's entries set (or, removed, dropped) as
// k3s-io/k3s pkg/node/controller.go@v1.35.5+k3s1 updateCoreDNSConfigMap
// sets them (read at 6a4781ad). Each line, cut at "#", with at least two
// fields is an address and its names, keyed by address (a later line of an
// address replaces an earlier one); a line whose first name is the node's
// and whose address is not the node's of that family is dropped. When the
// node's addresses already carry its names nothing changes; else its
// entries are set and the lines written sorted by address (bytes of
// net.ParseIP). A removed node has no addresses, so only its lines go.
func nodeHosts(hosts string, n hostsNode, removed bool) (string, bool) {
	if removed {
		n.ipv4, n.ipv6 = "", ""
	}
	byAddr := map[string]string{}
	for _, line := range strings.Split(hosts, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		ip := f[0]
		if f[1] == n.name {
			own := n.ipv4
			if strings.Contains(ip, ":") {
				own = n.ipv6
			}
			if ip != own {
				continue
			}
		}
		byAddr[ip] = strings.Join(f[1:], " ")
	}
	var names4, names6 string
	if n.ipv4 != "" {
		names4 = n.names
	}
	if n.ipv6 != "" {
		names6 = n.names
	}
	if !removed && byAddr[n.ipv4] == names4 && byAddr[n.ipv6] == names6 {
		return hosts, false
	}
	if n.ipv4 != "" {
		byAddr[n.ipv4] = names4
	}
	if n.ipv6 != "" {
		byAddr[n.ipv6] = names6
	}
	addrs := slices.Collect(maps.Keys(byAddr))
	sort.Slice(addrs, func(i, j int) bool { return bytes.Compare(net.ParseIP(addrs[i]), net.ParseIP(addrs[j])) < 0 })
	var b strings.Builder
	for _, ip := range addrs {
		b.WriteString(ip + " " + byAddr[ip] + "\n")
	}
	return b.String(), b.String() != hosts
}

// dnsFamilyPolicy is the kube-dns Service's ipFamilyPolicy: RequireDualStack
// with an address per family, else SingleStack (k3s-io/k3s
// pkg/server/server.go@v1.35.5+k3s1 stageFiles).
func dnsFamilyPolicy(clusterDNS []string) corev1.IPFamilyPolicy {
	if len(clusterDNS) > 1 {
		return corev1.IPFamilyPolicyRequireDualStack
	}
	return corev1.IPFamilyPolicySingleStack
}
