package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Conformance: each component's rendered objects against the facts of the
// upstream file it follows, read at the pinned tag (git show TAG:PATH).
// Every row names its source. A row with a deviation is where the lane
// deliberately differs from upstream; it asserts the lane's value and says
// what upstream has and why the lane differs. Nothing here can run the real
// images, so these rows are the proof that a real lane gets what upstream
// ships.
type fact struct {
	src       string // "repo PATH@TAG"
	what      string
	got       string
	want      string
	deviation string // upstream's value and the reason the lane differs
}

func checkFacts(t *testing.T, facts []fact) {
	t.Helper()
	for _, f := range facts {
		if f.src == "" || !strings.Contains(f.src, "@") {
			t.Errorf("%s: no repo PATH@TAG source", f.what)
		}
		if f.got != f.want {
			msg := fmt.Sprintf("%s:\n  got  %q\n  want %q\n  source %s", f.what, f.got, f.want, f.src)
			if f.deviation != "" {
				msg += "\n  (a deliberate deviation: " + f.deviation + ")"
			}
			t.Error(msg)
		}
	}
}

// view gives typed access to the rendered objects of one lane.
type view struct {
	t    *testing.T
	objs []*unstructured.Unstructured
}

func renderView(t *testing.T, o Options) view {
	t.Helper()
	o.Calico.Offline = true
	cs, err := Components(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := Flatten(cs)
	return view{t, objs}
}

func (v view) get(kind, name string, into runtime.Object) {
	v.t.Helper()
	find(v.t, v.objs, kind, name, into)
}

// installation is Calico's Installation among the rendered objects.
func (v view) installation() *unstructured.Unstructured {
	v.t.Helper()
	for _, u := range v.objs {
		if u.GetKind() == "Installation" {
			return u
		}
	}
	v.t.Fatal("no Installation")
	return nil
}

// labelsOf is the labels of the named object of kind.
func (v view) labelsOf(kind, name string) map[string]string {
	v.t.Helper()
	for _, u := range v.objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u.GetLabels()
		}
	}
	v.t.Fatalf("no %s %s", kind, name)
	return nil
}

// configMap is the rendered ConfigMap of that name.
func (v view) configMap(name string) *corev1.ConfigMap {
	v.t.Helper()
	var cm corev1.ConfigMap
	v.get("ConfigMap", name, &cm)
	return &cm
}

func (v view) ds(name string) *appsv1.DaemonSet {
	var ds appsv1.DaemonSet
	v.get("DaemonSet", name, &ds)
	return &ds
}

func container(ds *appsv1.DaemonSet, name string) corev1.Container {
	for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{Name: "MISSING " + name}
}

// mount renders a container's mount of a volume as "path [ro] [propagation]".
func mount(ds *appsv1.DaemonSet, ctr, volume string) string {
	for _, m := range container(ds, ctr).VolumeMounts {
		if m.Name != volume {
			continue
		}
		s := m.MountPath
		if m.ReadOnly {
			s += " ro"
		}
		if m.MountPropagation != nil {
			s += " " + string(*m.MountPropagation)
		}
		return s
	}
	return "not mounted"
}

func hostPath(ds *appsv1.DaemonSet, volume string) string {
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == volume {
			switch {
			case v.HostPath != nil:
				return v.HostPath.Path
			case v.ConfigMap != nil:
				return "configMap " + v.ConfigMap.Name
			}
		}
	}
	return "no volume"
}

// hostPathTypes lists each hostPath volume's type ("unset" for none).
func hostPathTypes(ds *appsv1.DaemonSet) string {
	var out []string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		t := "unset"
		if v.HostPath.Type != nil && *v.HostPath.Type != "" {
			t = string(*v.HostPath.Type)
		}
		out = append(out, v.Name+" "+t)
	}
	return strings.Join(out, ", ")
}

// ownLabels are an object's labels without the lane's managed-by label.
func ownLabels(l map[string]string) string {
	out := map[string]string{}
	for k, v := range l {
		if k != managedByLabel {
			out[k] = v
		}
	}
	return fmt.Sprint(out)
}

// dsLabels renders a DaemonSet's labels, its pods' labels and its selector.
func dsLabels(ds *appsv1.DaemonSet) string {
	return ownLabels(ds.Labels) + " pods " + ownLabels(ds.Spec.Template.Labels) + " selector " + fmt.Sprint(ds.Spec.Selector.MatchLabels)
}

func affinity(ds *appsv1.DaemonSet) string {
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "none"
	}
	var out []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			out = append(out, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
		}
	}
	return strings.Join(out, "; ")
}

// hostPathTypeWhy is the reason every component's hostPath volumes name a
// type where upstream names none.
const hostPathTypeWhy = "upstream sets no type, which checks nothing and leaves a missing path to the container runtime (k8s.io/api core/v1/types.go@v0.37.2 HostPathUnset); " +
	"the lane names what each path is, so kubelet checks it before the container starts and a wrong node fails with the volume named, and creates the ones that may be missing (DirectoryOrCreate, mode 0755)"

// earlyStartWhy is why the SR-IOV components tolerate every taint: a node
// stays tainted not-ready:NoSchedule until it is Ready, and a DaemonSet
// gets no toleration of it.
const earlyStartWhy = "a node is tainted node.kubernetes.io/not-ready:NoSchedule until it is Ready (k8s.io/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go@v1.36.3 doNoScheduleTaintingPass) " +
	"and the DaemonSet controller adds no toleration of it (pkg/controller/daemon/util/daemonset_util.go@v1.36.3 AddOrUpdateDaemonPodTolerations), so upstream's pods would be made only once Flannel had made the agent Ready, " +
	"in series on up's way to allocatable; this hostNetwork pod runs on an agent that is not Ready yet, as Multus and Flannel do"

func cmdline(c corev1.Container) string { return strings.Join(slices.Concat(c.Command, c.Args), " ") }

func probe(p *corev1.Probe) string {
	if p == nil || p.HTTPGet == nil {
		return "none"
	}
	return fmt.Sprintf("GET %s port %s delay %ds period %ds", p.HTTPGet.Path, p.HTTPGet.Port.String(), p.InitialDelaySeconds, p.PeriodSeconds)
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				return "fieldRef " + e.ValueFrom.FieldRef.FieldPath
			}
			return e.Value
		}
	}
	return "unset"
}

func res(c corev1.Container) string {
	r := c.Resources
	return fmt.Sprintf("requests cpu %s memory %s, limits cpu %s memory %s",
		r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Cpu(), r.Limits.Memory())
}

func rules(v view, name string) string {
	var cr rbacv1.ClusterRole
	v.get("ClusterRole", name, &cr)
	var out []string
	for _, r := range cr.Rules {
		out = append(out, fmt.Sprintf("%v %v %v", r.APIGroups, r.Resources, r.Verbs))
	}
	return strings.Join(out, "; ")
}

func privileged(c corev1.Container) string {
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil {
		return "unset"
	}
	return fmt.Sprint(*c.SecurityContext.Privileged)
}

const k3dRunSplit = "k3d mounts /run and /var/run as two tmpfs (k3d-io/k3d pkg/types/defaults.go@v5.9.0 DefaultTmpfsMounts)"

func TestConformanceFlannel(t *testing.T) {
	v := renderView(t, defaultTestOptions())
	ds := v.ds(flannelDaemonSet)
	main := container(ds, "kube-flannel")
	src := FlannelUpstream
	var ns corev1.Namespace
	v.get("Namespace", flannelNamespace, &ns)
	cm := v.configMap(flannelConfigMap)
	var conflist struct {
		Name, CNIVersion string
		Plugins          []map[string]any
	}
	if err := json.Unmarshal([]byte(cm.Data["cni-conf.json"]), &conflist); err != nil {
		t.Fatal(err)
	}
	var netConf flannelNetConf
	if err := json.Unmarshal([]byte(cm.Data["net-conf.json"]), &netConf); err != nil {
		t.Fatal(err)
	}
	plugins := func() string {
		var out []string
		for _, p := range conflist.Plugins {
			out = append(out, fmt.Sprint(p))
		}
		return strings.Join(out, " ")
	}
	checkFacts(t, []fact{
		{src, "namespace and its pod security", ns.Name + " " + ns.Labels["pod-security.kubernetes.io/enforce"], "kube-flannel privileged", ""},
		{src, "ClusterRole flannel rules", rules(v, flannelName), "[] [pods] [get]; [] [nodes] [get list watch]; [] [nodes/status] [patch]", ""},
		{src, "conflist name, version", conflist.Name + " " + conflist.CNIVersion, "cbr0 0.3.1", ""},
		{src, "conflist plugins", plugins(), "map[delegate:map[hairpinMode:true isDefaultGateway:true] type:flannel] map[capabilities:map[portMappings:true] type:portmap]", ""},
		{src, "net-conf backend", fmt.Sprint(netConf.Backend["Type"], " nftables=", netConf.EnableNFTables), "vxlan nftables=false", ""},
		{src, "net-conf Network", netConf.Network, "10.42.0.0/16",
			"upstream 10.244.0.0/16; k3s allocates node podCIDRs from its --cluster-cidr, default 10.42.0.0/16, and --kube-subnet-mgr uses those"},
		{src, "hostNetwork, priority class, service account", fmt.Sprint(ds.Spec.Template.Spec.HostNetwork, " ", ds.Spec.Template.Spec.PriorityClassName, " ", ds.Spec.Template.Spec.ServiceAccountName), "true system-node-critical flannel", ""},
		{src, "install-cni-plugin image", container(ds, "install-cni-plugin").Image, "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3", ""},
		{src, "install-cni-plugin command", cmdline(container(ds, "install-cni-plugin")), "cp -f /flannel /opt/cni/bin/flannel", ""},
		{src, "install-cni-plugin mounts cni-plugin", mount(ds, "install-cni-plugin", "cni-plugin"), "/opt/cni/bin", ""},
		{src, "install-cni writes the conflist atomically (cmd/install_conf/main.go@v0.28.9)", cmdline(container(ds, "install-cni")), "/opt/bin/install-conf /etc/kube-flannel/cni-conf.json /etc/cni/net.d/10-flannel.conflist", ""},
		{src, "install-cni mounts cni", mount(ds, "install-cni", "cni"), "/etc/cni/net.d", ""},
		{src, "install-cni mounts flannel-cfg", mount(ds, "install-cni", "flannel-cfg"), "/etc/kube-flannel/", ""},
		{src, "kube-flannel image", main.Image, "ghcr.io/flannel-io/flannel:v0.28.9", ""},
		{src, "kube-flannel command", cmdline(main), "/opt/bin/flanneld --ip-masq --kube-subnet-mgr --healthz-port=8081", ""},
		{src, "kube-flannel port", fmt.Sprint(main.Ports), "[{healthz 0 8081 TCP }]", ""},
		{src, "liveness (main.go@v0.28.9: /healthz answers while flanneld runs)", probe(main.LivenessProbe), "GET /healthz port healthz delay 10s period 30s", ""},
		{src, "readiness (main.go@v0.28.9: /readyz once subnet.env is written)", probe(main.ReadinessProbe), "GET /readyz port healthz delay 0s period 2s",
			"upstream delay 5s period 10s; up waits for this Ready, and a first probe that came before subnet.env cost every lane ~10 s"},
		{src, "env CONT_WHEN_CACHE_NOT_READY", env(main, "CONT_WHEN_CACHE_NOT_READY"), "false", ""},
		{src, "env EVENT_QUEUE_DEPTH", env(main, "EVENT_QUEUE_DEPTH"), "5000", ""},
		{src, "env POD_NAME, POD_NAMESPACE", env(main, "POD_NAME") + ", " + env(main, "POD_NAMESPACE"), "fieldRef metadata.name, fieldRef metadata.namespace", ""},
		{src, "kube-flannel security", privileged(main) + fmt.Sprint(main.SecurityContext.Capabilities.Add), "false[NET_ADMIN NET_RAW]", ""},
		{src, "kube-flannel resources", res(main), "requests cpu 100m memory 50Mi, limits cpu 0 memory 0", ""},
		{src, "kube-flannel mounts run", mount(ds, "kube-flannel", "run"), "/run/flannel", ""},
		{src, "kube-flannel mounts flannel-cfg", mount(ds, "kube-flannel", "flannel-cfg"), "/etc/kube-flannel/", ""},
		{src, "kube-flannel mounts xtables-lock", mount(ds, "kube-flannel", "xtables-lock"), "/run/xtables.lock", ""},
		// /run/flannel stays /run: flanneld writes subnet.env there and the
		// flannel CNI plugin, run by containerd in the node, reads it there.
		{src, "hostPath run", hostPath(ds, "run"), "/run/flannel", ""},
		{src, "hostPath cni-plugin", hostPath(ds, "cni-plugin"), "/opt/cni/bin", ""},
		{src, "hostPath cni", hostPath(ds, "cni"), "/etc/cni/flannel.d",
			"upstream /etc/cni/net.d; there containerd would load the conflist and the node turn Ready before flanneld has written subnet.env, " +
				"so the first pods on the pod network failed their sandbox and waited out kubelet's ~10 s retry on every up; Multus reads it here and " +
				"writes the one config containerd loads once subnet.env exists (TestConformanceMultus)"},
		{src, "hostPath xtables-lock", hostPath(ds, "xtables-lock"), "/run/xtables.lock", ""},
		{src, "volume flannel-cfg", hostPath(ds, "flannel-cfg"), "configMap kube-flannel-cfg", ""},
		{src, "tolerations", fmt.Sprint(ds.Spec.Template.Spec.Tolerations), "[{ Exists   <nil>}]",
			"upstream tolerates NoSchedule only; the lane's CNI must run on every node whatever its taints"},
		{src, "DaemonSet labels, pod labels, selector", dsLabels(ds), "map[app:flannel k8s-app:flannel tier:node] pods map[app:flannel tier:node] selector map[app:flannel]", ""},
		{src, "labels of the Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding and ConfigMap", fmt.Sprint(ownLabels(ns.Labels), " ", ownLabels(v.labelsOf("ServiceAccount", flannelName)), " ",
			ownLabels(v.labelsOf("ClusterRole", flannelName)), " ", ownLabels(v.labelsOf("ClusterRoleBinding", flannelName)), " ", ownLabels(cm.Labels)),
			"map[k8s-app:flannel pod-security.kubernetes.io/enforce:privileged] map[k8s-app:flannel] map[k8s-app:flannel] map[k8s-app:flannel] map[app:flannel k8s-app:flannel tier:node]", ""},
		{src, "node affinity (kubelet labels every node with its OS)", affinity(ds), "kubernetes.io/os In [linux]", ""},
		{src, "update strategy left to apps/v1's default, RollingUpdate", string(ds.Spec.UpdateStrategy.Type), "", ""},
		{src, "hostPath types", hostPathTypes(ds), "run DirectoryOrCreate, cni-plugin DirectoryOrCreate, cni DirectoryOrCreate, xtables-lock FileOrCreate, k3s-bin Directory",
			"upstream types only xtables-lock (FileOrCreate); " + hostPathTypeWhy},
		// The lane's own init container: k3s ships the standard plugins.
		{"k3s-io/k3s scripts/package-cli@v1.35.5+k3s1 (read at 6a4781ad)", "install-k3s-cni-plugins copies k3s's plugins from the node's /bin",
			cmdline(container(ds, "install-k3s-cni-plugins")) + " | " + mount(ds, "install-k3s-cni-plugins", "k3s-bin") + " <- " + hostPath(ds, "k3s-bin"),
			"cp -fL /host/bin/bandwidth /host/bin/bridge /host/bin/host-local /host/bin/loopback /host/bin/portmap /opt/cni/bin/ | /host/bin ro <- /bin",
			"not in upstream, which expects the plugins installed; k3s links bridge, host-local, ... to its multi-call /bin/cni (relative links; the data archive is unpacked at / in the image, package/Dockerfile@v1.35.5+k3s1), and installs none of them with --flannel-backend=none (pkg/executor/embed/embed.go@v1.35.5+k3s1)"},
	})
}

func TestConformanceMultus(t *testing.T) {
	v := renderView(t, defaultTestOptions())
	ds := v.ds(multusDaemonSet)
	src := MultusUpstream
	var crd unstructured.Unstructured
	for _, u := range v.objs {
		if u.GetKind() == "CustomResourceDefinition" && u.GetName() == nadPlural+"."+nadGroup {
			crd = *u
		}
	}
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	cm := v.configMap(multusConfigMap)
	var dc multusDaemonConfig
	if err := json.Unmarshal([]byte(cm.Data["daemon-config.json"]), &dc); err != nil {
		t.Fatal(err)
	}
	daemon := container(ds, "kube-multus")
	init := container(ds, "install-multus-binary")
	checkFacts(t, []fact{
		{src, "NAD CRD kind, scope, short names", fmt.Sprint(kind, " ", scope, " ", short), "NetworkAttachmentDefinition Namespaced [nad net-attach-def]", ""},
		{src, "ClusterRole multus rules", rules(v, multusName), "[k8s.cni.cncf.io] [*] [*]; [] [pods pods/status] [get list update watch]; [ events.k8s.io] [events] [create patch update]", ""},
		{src, "DaemonSet labels, pod labels, selector", dsLabels(ds), "map[app:multus name:multus tier:node] pods map[app:multus name:multus tier:node] selector map[name:multus]", ""},
		{src, "ConfigMap labels", ownLabels(cm.Labels), "map[app:multus tier:node]", ""},
		{src, "tolerations (every NoSchedule and NoExecute taint)", fmt.Sprint(ds.Spec.Template.Spec.Tolerations), "[{ Exists  NoSchedule <nil>} { Exists  NoExecute <nil>}]", ""},
		{src, "update strategy", string(ds.Spec.UpdateStrategy.Type), "RollingUpdate", ""},
		{src, "hostPath types", hostPathTypes(ds),
			"cni DirectoryOrCreate, cnibin DirectoryOrCreate, host-run Directory, host-var-lib-cni-multus DirectoryOrCreate, host-var-lib-kubelet Directory, host-run-k8s-cni-cncf-io DirectoryOrCreate, host-run-netns DirectoryOrCreate, hostroot Directory, multus-conf-dir DirectoryOrCreate, flannel-conf DirectoryOrCreate",
			hostPathTypeWhy},
		{src, "daemon config", fmt.Sprintf("%+v", dc), "{ChrootDir:/hostroot CNIVersion:0.3.1 LogLevel:verbose LogToStderr:true CNIConfigDir:/host/etc/cni/net.d MultusAutoconfigDir:/host/etc/cni/flannel.d MultusConfigFile:auto SocketDir:/host/run/multus/ ReadinessIndicatorFile:/host/run/flannel/subnet.env}",
			"upstream autoconfigures from the CNI conf dir with no readiness indicator; the lane reads Flannel's conflist from a dir containerd does not load " +
				"and writes 00-multus.conf, the one config it loads, only once flanneld has written subnet.env (cmd/multus-daemon/main.go@v4.3.0 waits up to 45 s " +
				"for the indicator before its config manager starts), so a node is Ready only when a pod can get its default network"},
		{src, "daemon mounts flannel-conf", mount(ds, daemon.Name, "flannel-conf"), "/host/etc/cni/flannel.d ro", "upstream has no such dir (see the daemon config)"},
		{src, "hostPath flannel-conf", hostPath(ds, "flannel-conf"), "/etc/cni/flannel.d", "upstream has no such dir (see the daemon config)"},
		{src, "hostNetwork, hostPID, grace", fmt.Sprint(ds.Spec.Template.Spec.HostNetwork, ds.Spec.Template.Spec.HostPID, *ds.Spec.Template.Spec.TerminationGracePeriodSeconds), "true true 10", ""},
		{src, "daemon command", cmdline(daemon), "/usr/src/multus-cni/bin/multus-daemon", ""},
		{src, "daemon privileged", privileged(daemon), "true", ""},
		{src, "daemon env MULTUS_NODE_NAME", env(daemon, "MULTUS_NODE_NAME"), "fieldRef spec.nodeName", ""},
		{src, "init command (cmd/install_multus@v4.3.0)", cmdline(init), "/usr/src/multus-cni/bin/install_multus -d /host/opt/cni/bin -t thick", ""},
		{src, "init mounts cnibin", mount(ds, init.Name, "cnibin"), "/host/opt/cni/bin Bidirectional", ""},
		{src, "init resources", res(init), "requests cpu 10m memory 15Mi, limits cpu 0 memory 0", ""},
		{src, "daemon mounts cni", mount(ds, daemon.Name, "cni"), "/host/etc/cni/net.d", ""},
		{src, "daemon mounts cnibin where the node has it", mount(ds, daemon.Name, "cnibin"), "/opt/cni/bin", ""},
		{src, "daemon mounts host-run", mount(ds, daemon.Name, "host-run"), "/host/run", ""},
		{src, "daemon mounts host-var-lib-cni-multus", mount(ds, daemon.Name, "host-var-lib-cni-multus"), "/var/lib/cni/multus", ""},
		{src, "daemon mounts host-var-lib-kubelet", mount(ds, daemon.Name, "host-var-lib-kubelet"), "/var/lib/kubelet HostToContainer", ""},
		{src, "daemon mounts host-run-k8s-cni-cncf-io", mount(ds, daemon.Name, "host-run-k8s-cni-cncf-io"), "/run/k8s.cni.cncf.io", ""},
		{src, "daemon mounts host-run-netns", mount(ds, daemon.Name, "host-run-netns"), "/run/netns HostToContainer", ""},
		{src, "daemon mounts multus-daemon-config", mount(ds, daemon.Name, "multus-daemon-config"), "/etc/cni/net.d/multus.d ro", ""},
		{src, "daemon mounts hostroot", mount(ds, daemon.Name, "hostroot"), "/hostroot HostToContainer", ""},
		{src, "daemon mounts multus-conf-dir", mount(ds, daemon.Name, "multus-conf-dir"), "/etc/cni/multus/net.d", ""},
		{src, "hostPath cni", hostPath(ds, "cni"), "/etc/cni/net.d", ""},
		{src, "hostPath cnibin", hostPath(ds, "cnibin"), "/opt/cni/bin", ""},
		{src, "hostPath hostroot", hostPath(ds, "hostroot"), "/", ""},
		{src, "hostPath host-run (the shim dials /run/multus/multus.sock)", hostPath(ds, "host-run"), "/run", ""},
		{src, "hostPath host-var-lib-cni-multus", hostPath(ds, "host-var-lib-cni-multus"), "/var/lib/cni/multus", ""},
		{src, "hostPath host-var-lib-kubelet", hostPath(ds, "host-var-lib-kubelet"), "/var/lib/kubelet", ""},
		{src, "hostPath multus-conf-dir", hostPath(ds, "multus-conf-dir"), "/etc/cni/multus/net.d", ""},
		{src, "volume multus-daemon-config", hostPath(ds, "multus-daemon-config"), "configMap multus-daemon-config", ""},
		{src, "hostPath host-run-netns", hostPath(ds, "host-run-netns"), "/var/run/netns",
			"upstream /run/netns/; containerd opens pod netns under /var/run/netns (containerd internal/cri/server/sandbox_run.go@v2.2.3) and " + k3dRunSplit},
		{src, "hostPath host-run-k8s-cni-cncf-io", hostPath(ds, "host-run-k8s-cni-cncf-io"), "/var/run/k8s.cni.cncf.io",
			"upstream /run/k8s.cni.cncf.io; the device plugin writes /var/run/k8s.cni.cncf.io/devinfo/dp (network-attachment-definition-client pkg/utils/cniconfig.go@v1.7.7) and " + k3dRunSplit},
		{src, "image", daemon.Image + " " + init.Image, MultusImage + " " + MultusImage,
			"upstream ghcr.io/k8snetworkplumbingwg/multus-cni:snapshot-thick, a moving tag; the lane pins the release"},
		{src, "daemon resources", res(daemon), "requests cpu 100m memory 64Mi, limits cpu 500m memory 512Mi",
			"upstream 100m/50Mi for both; 50Mi is OOM-killed in practice (k8snetworkplumbingwg/multus-cni#1346, #1349)"},
		{src, "priority class", ds.Spec.Template.Spec.PriorityClassName, "system-node-critical",
			"upstream none; every pod's network goes through the daemon, so it must not be evicted first"},
	})
}

func TestConformanceSRIOVCNI(t *testing.T) {
	v := renderView(t, defaultTestOptions())
	ds := v.ds(sriovCNIDaemonSet)
	c := container(ds, "kube-sriov-cni")
	sc := c.SecurityContext
	src := SRIOVCNIUpstream
	checkFacts(t, []fact{
		{src, "namespace", ds.Namespace, "kube-system", ""},
		{src, "no command: the image's entrypoint copies the binary and idles (images/entrypoint.sh@v2.10.0)", cmdline(c), "", ""},
		{src, "security", fmt.Sprint(*sc.AllowPrivilegeEscalation, *sc.Privileged, *sc.ReadOnlyRootFilesystem, sc.Capabilities.Drop), "false false true [ALL]", ""},
		{src, "resources", res(c), "requests cpu 100m memory 50Mi, limits cpu 100m memory 50Mi", ""},
		{src, "hostNetwork", fmt.Sprint(ds.Spec.Template.Spec.HostNetwork), "true",
			"upstream pod network; the pod only copies a binary, and on the pod network it cannot start before Flannel has written subnet.env (a failed sandbox, then kubelet's ~10 s retry, on every up)"},
		{src, "mount cnibin", mount(ds, c.Name, "cnibin"), "/host/opt/cni/bin", ""},
		{src, "hostPath cnibin", hostPath(ds, "cnibin"), "/opt/cni/bin", ""},
		{src, "image", c.Image, "ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0", "upstream's manifest names the image untagged (latest); the lane pins the release"},
		{src, "image pull policy", string(c.ImagePullPolicy), "IfNotPresent", ""},
		{src, "DaemonSet labels, pod labels, selector", dsLabels(ds), "map[app:sriov-cni tier:node] pods map[app:sriov-cni name:sriov-cni tier:node] selector map[name:sriov-cni]", ""},
		{src, "update strategy left to apps/v1's default, RollingUpdate", string(ds.Spec.UpdateStrategy.Type), "", ""},
		{src, "tolerations", fmt.Sprint(ds.Spec.Template.Spec.Tolerations), "[{ Exists   <nil>}]",
			"upstream tolerates node-role.kubernetes.io/master and control-plane NoSchedule only; " + earlyStartWhy},
		{src, "hostPath types", hostPathTypes(ds), "cnibin DirectoryOrCreate", hostPathTypeWhy},
		{src, "node selector", fmt.Sprint(ds.Spec.Template.Spec.NodeSelector), "map[sriov_capable:true]",
			"upstream runs on every node; kubevirtci's providers label SR-IOV agents sriov_capable=true and deploy only there"},
	})
}

func TestConformanceDevicePlugin(t *testing.T) {
	v := renderView(t, defaultTestOptions())
	ds := v.ds(devicePluginDaemonSet)
	c := container(ds, "kube-sriovdp")
	src := DevicePluginUpstream
	cm := v.configMap(DevicePluginConfigMap)
	checkFacts(t, []fact{
		{src, "service account", ds.Spec.Template.Spec.ServiceAccountName, "sriov-device-plugin", ""},
		{src, "namespace", ds.Namespace + " " + cm.Namespace, "kube-system kube-system", ""},
		{src, "hostNetwork", fmt.Sprint(ds.Spec.Template.Spec.HostNetwork), "true", ""},
		{src, "privileged", privileged(c), "true", ""},
		{src, "no command: the image's entrypoint (images/entrypoint.sh@v3.11.0) turns --opt=value into sriovdp flags",
			cmdline(c), "--log-dir=sriovdp --log-level=10 --resource-prefix=kubevirt.io --config-file=/etc/pcidp/config.json",
			"upstream passes only --log-dir and --log-level; kubevirtci's providers advertise kubevirt.io/<name>, and the binary's default config file is named for clarity"},
		{src, "resources", res(c), "requests cpu 250m memory 40Mi, limits cpu 1 memory 200Mi", ""},
		{src, "mount devicesock", mount(ds, c.Name, "devicesock") + " <- " + hostPath(ds, "devicesock"), "/var/lib/kubelet/device-plugins <- /var/lib/kubelet/device-plugins", ""},
		{src, "mount plugins-registry", mount(ds, c.Name, "plugins-registry") + " <- " + hostPath(ds, "plugins-registry"), "/var/lib/kubelet/plugins_registry <- /var/lib/kubelet/plugins_registry", ""},
		{src, "mount log", mount(ds, c.Name, "log") + " <- " + hostPath(ds, "log"), "/var/log <- /var/log", ""},
		{src, "mount device-info (already /var/run upstream)", mount(ds, c.Name, "device-info") + " <- " + hostPath(ds, "device-info"), "/var/run/k8s.cni.cncf.io/devinfo/dp <- /var/run/k8s.cni.cncf.io/devinfo/dp", ""},
		{src, "config", mount(ds, c.Name, "config-volume") + " <- " + hostPath(ds, "config-volume") + " key " + strings.Join(slices.Sorted(func(yield func(string) bool) {
			for k := range cm.Data {
				if !yield(k) {
					return
				}
			}
		}), ","), "/etc/pcidp ro <- configMap sriovdp-config key config.json", "upstream mounts it read-write; nothing writes it"},
		{src, "image", c.Image, "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0", "upstream's manifest uses :latest; the lane pins the release"},
		{src, "image pull policy", string(c.ImagePullPolicy), "IfNotPresent", ""},
		{src, "DaemonSet labels, pod labels, selector", dsLabels(ds), "map[app:sriovdp tier:node] pods map[app:sriovdp name:sriov-device-plugin tier:node] selector map[name:sriov-device-plugin]", ""},
		// sriovdp reads no environment variable; NODE_NAME appears only in
		// the per-node config file example (docs/config-file/README.md@v3.11.0).
		{src, "no env", fmt.Sprint(c.Env), "[]", ""},
		{src, "update strategy left to apps/v1's default, RollingUpdate", string(ds.Spec.UpdateStrategy.Type), "", ""},
		{src, "tolerations", fmt.Sprint(ds.Spec.Template.Spec.Tolerations), "[{ Exists   <nil>}]", "upstream tolerates no taint; " + earlyStartWhy},
		{src, "hostPath types", hostPathTypes(ds), "devicesock Directory, plugins-registry DirectoryOrCreate, log Directory, device-info DirectoryOrCreate",
			"upstream types only device-info (DirectoryOrCreate); " + hostPathTypeWhy},
		{src, "node selector", fmt.Sprint(ds.Spec.Template.Spec.NodeSelector), "map[sriov_capable:true]",
			"upstream runs on every node; kubevirtci's providers deploy it on sriov_capable=true agents"},
		// The lane selects VFIO VFs as upstream's example does.
		{"k8snetworkplumbingwg/sriov-network-device-plugin deployments/configMap.yaml@v3.11.0", "vfio-pci pool selects by driver and PF names",
			fmt.Sprintf("%+v", devicePluginConfig(mustDefaults(t, defaultTestOptions())).ResourceList[0].Selectors), "[{Vendors:[] Devices:[] Drivers:[vfio-pci] PCIAddresses:[] PFNames:[ens1f0 ens1f1] RootDevices:[] LinkTypes:[] IsRdma:false ACPIIndexes:[] NeedVhostNet:false DDPProfiles:[] VdpaType: PKeys:[] AuxTypes:[]}]", ""},
		{"k8snetworkplumbingwg/sriov-network-device-plugin deployments/configMap.yaml@v3.11.0", "netdevice pool selects by PF names alone",
			fmt.Sprintf("%+v", devicePluginConfig(mustDefaults(t, netdeviceOptions())).ResourceList[0].Selectors), "[{Vendors:[] Devices:[] Drivers:[] PCIAddresses:[] PFNames:[ens1f0 ens1f1] RootDevices:[] LinkTypes:[] IsRdma:false ACPIIndexes:[] NeedVhostNet:false DDPProfiles:[] VdpaType: PKeys:[] AuxTypes:[]}]",
			"upstream's example netdevice pool names vendors, devices and drivers (i40evf, iavf, ixgbevf) of one NIC family; a lane runs on whatever NIC the host has, " +
				"and with no drivers list the plugin filters by driver not at all (pkg/factory/factory.go@v3.11.0 FilterBySelector), while pfNames keeps the VFs of the lane's PFs (pkg/resources/deviceSelectors.go@v3.11.0 pfNameSelector)"},
	})
}

func TestConformanceCalico(t *testing.T) {
	o := defaultTestOptions()
	o.CNI = config.CNICalico
	v := renderView(t, o)
	inst := v.installation()
	pools, _, _ := unstructured.NestedSlice(inst.Object, "spec", "calicoNetwork", "ipPools")
	fwd, _, _ := unstructured.NestedString(inst.Object, "spec", "calicoNetwork", "containerIPForwarding")
	cr := "projectcalico/calico manifests/custom-resources.yaml@" + CalicoVersion
	op := "tigera/operator api/v1/installation_types.go@v1.42.3"
	var dc multusDaemonConfig
	if err := json.Unmarshal([]byte(v.configMap(multusConfigMap).Data["daemon-config.json"]), &dc); err != nil {
		t.Fatal(err)
	}
	checkFacts(t, []fact{
		{MultusUpstream, "Multus autoconfigures from the CNI conf dir, where the operator writes Calico's conflist; no readiness indicator, no flannel-conf",
			fmt.Sprint(dc.MultusAutoconfigDir, " [", dc.ReadinessIndicatorFile, "] ", hostPath(v.ds(multusDaemonSet), "flannel-conf")), "/host/etc/cni/net.d [] no volume", ""},
		{cr, "Installation name and group", inst.GetAPIVersion() + " " + inst.GetName(), "operator.tigera.io/v1 default", ""},
		{cr, "IP pool", fmt.Sprint(pools), "[map[blockSize:26 cidr:192.168.0.0/16 encapsulation:VXLANCrossSubnet name:default-ipv4-ippool natOutgoing:Enabled nodeSelector:all()]]", ""},
		{op, "containerIPForwarding (enum Enabled|Disabled)", fwd, "Enabled",
			"not in custom-resources.yaml; k3d's Calico guide sets it (k3d-io/k3d docs/usage/advanced/calico.md@v5.9.0), and VMs behind the pod network need it"},
		{"tigera/operator pkg/controller/installation/core_controller.go@v1.42.3", "TigeraStatus waited for", calicoTigeraStatus + " " + tigeraStatusGVR.String(), "calico operator.tigera.io/v1, Resource=tigerastatuses", ""},
		{"tigera/operator pkg/common/common.go@v1.42.3", "calico-node DaemonSet", calicoNodeNamespace + "/" + calicoNodeDaemonSet, "calico-system/calico-node", ""},
	})
}

func netdeviceOptions() Options {
	o := defaultTestOptions()
	o.VFDriver = config.VFDriverNetdevice
	return o
}

func mustDefaults(t *testing.T, o Options) Options {
	t.Helper()
	o, err := o.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestConformanceInjector(t *testing.T) {
	o := defaultTestOptions()
	o.NetworkResourcesInjector.Enabled = true
	v := renderView(t, o)
	const repo = "k8snetworkplumbingwg/network-resources-injector "
	auth, service, server, webhook := InjectorUpstream[0], InjectorUpstream[1], InjectorUpstream[2], InjectorUpstream[3]
	mainGo := repo + "cmd/webhook/main.go@" + InjectorVersion
	installer := repo + "pkg/installer/installer.go@" + InjectorVersion
	const kvServer = "kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/network_resources_injector/server.yaml@39bd4947ba4d"
	const kvBump = "kubevirt/kubevirtci hack/bump-net-resources-injector.sh@39bd4947ba4d"

	var dep appsv1.Deployment
	v.get("Deployment", InjectorName, &dep)
	// The DaemonSet helpers read a pod template.
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: dep.Spec.Template}}
	c := container(ds, "webhook-server")
	sc := c.SecurityContext
	var sa corev1.ServiceAccount
	v.get("ServiceAccount", injectorSA, &sa)
	var svc corev1.Service
	v.get("Service", InjectorService, &svc)
	var secret corev1.Secret
	v.get("Secret", InjectorSecret, &secret)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	v.get("MutatingWebhookConfiguration", InjectorWebhookConfig, &mwc)
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(mwc.Webhooks))
	}
	wh := mwc.Webhooks[0]
	binding := func(name string) string {
		var b rbacv1.ClusterRoleBinding
		v.get("ClusterRoleBinding", name, &b)
		return fmt.Sprintf("%s -> %v", b.RoleRef.Name, b.Subjects)
	}
	var kinds, roles []string
	for _, u := range v.objs {
		if strings.HasPrefix(u.GetName(), InjectorName) {
			kinds = append(kinds, u.GetKind()+" "+u.GetName())
			if u.GetKind() == "ClusterRole" {
				roles = append(roles, u.GetName())
			}
		}
	}
	secretKeys := slices.Sorted(func(yield func(string) bool) {
		for k := range secret.Data {
			if !yield(k) {
				return
			}
		}
	})
	var whRules []string
	for _, r := range wh.Rules {
		whRules = append(whRules, fmt.Sprint(r.Operations, r.APIGroups, r.APIVersions, r.Resources))
	}
	nsSel := fmt.Sprint(wh.NamespaceSelector.MatchExpressions)
	volume := "none"
	for _, vol := range dep.Spec.Template.Spec.Volumes {
		if vol.Name == "tls" && vol.Secret != nil {
			volume = "secret " + vol.Secret.SecretName
		}
	}
	checkFacts(t, []fact{
		{auth, "service account", sa.Namespace + "/" + sa.Name, "kube-system/network-resources-injector-sa", ""},
		{auth, "ClusterRole network-resources-injector rules", rules(v, InjectorName),
			"[ k8s.cni.cncf.io extensions apps] [replicationcontrollers replicasets daemonsets statefulsets pods network-attachment-definitions] [*]", ""},
		{auth, "ClusterRole network-resources-injector-configmaps rules (the nri-control-switches ConfigMap, cmd/webhook/main.go@v1.9.0)", rules(v, injectorConfigMapsRole), "[] [configmaps] [get]", ""},
		{auth, "network-resources-injector-role-binding", binding("network-resources-injector-role-binding"), "network-resources-injector -> [{ServiceAccount  network-resources-injector-sa kube-system}]", ""},
		{auth, "network-resources-injector-configmaps-role-binding", binding("network-resources-injector-configmaps-role-binding"), "network-resources-injector-configmaps -> [{ServiceAccount  network-resources-injector-sa kube-system}]", ""},
		{auth, "ClusterRoles granted", strings.Join(roles, " "), "network-resources-injector network-resources-injector-configmaps",
			"upstream also grants * on secrets, mutating/validatingwebhookconfigurations and services (and binds them), for the installer init container, which makes the certificate, the webhook configuration and the Service at run time; the lane applies those itself, so the server gets only what it reads"},
		{auth, "no network-resources-injector-sa-secret", fmt.Sprint(slices.Contains(kinds, "Secret network-resources-injector-sa-secret")), "false",
			"upstream adds a legacy long-lived service-account-token Secret that nothing mounts; the pod authenticates with its projected token"},
		{service, "Service", fmt.Sprintf("%s/%s port %d -> %s selector %v", svc.Namespace, svc.Name, svc.Spec.Ports[0].Port, svc.Spec.Ports[0].TargetPort.String(), svc.Spec.Selector),
			"kube-system/network-resources-injector-service port 443 -> 8443 selector map[app:network-resources-injector]", ""},
		{server, "Deployment, replicas, selector, service account", fmt.Sprintf("%s/%s %d %v %s", dep.Namespace, dep.Name, *dep.Spec.Replicas, dep.Spec.Selector.MatchLabels, dep.Spec.Template.Spec.ServiceAccountName),
			"kube-system/network-resources-injector 2 map[app:network-resources-injector] network-resources-injector-sa", ""},
		{server, "pod labels", fmt.Sprint(dep.Spec.Template.Labels), "map[app:network-resources-injector]", ""},
		{server, "image", c.Image + " " + string(c.ImagePullPolicy), "ghcr.io/k8snetworkplumbingwg/network-resources-injector:v1.9.0 IfNotPresent",
			"upstream network-resources-injector:latest; the release workflow pushes ghcr.io/k8snetworkplumbingwg/network-resources-injector:<tag> (.github/workflows/image-push-release.yml@v1.9.0), pinned as " + kvServer + " does"},
		{repo + "Dockerfile@" + InjectorVersion, "webhook is on the image's PATH (/usr/bin/webhook)", c.Command[0], "webhook", ""},
		{server, "command line", cmdline(c),
			"webhook -bind-address=0.0.0.0 -port=8443 -tls-private-key-file=/etc/tls/tls.key -tls-cert-file=/etc/tls/tls.crt -health-check-port=8444 -logtostderr -v=2 -insecure",
			"upstream ends at -logtostderr; kubevirtci adds -v=2 and -insecure (" + kvBump + "): without -insecure the server demands a client certificate signed by the service account CA (" + mainGo + ", pkg/webhook/tlsutils.go@v1.9.0 GetClientAuth), which kube-apiserver does not present to webhooks"},
		{repo + "pkg/controlswitches/controlswitches.go@" + InjectorVersion, "default -network-resource-name-keys is the NAD annotation the lane's NADs carry",
			ResourceNameAnnotation, "k8s.v1.cni.cncf.io/resourceName", ""},
		{server, "env NAMESPACE (where the server looks for nri-control-switches)", env(c, "NAMESPACE"), "fieldRef metadata.namespace", ""},
		{server, "security context", fmt.Sprint(*sc.RunAsUser, " ", *sc.RunAsGroup, " ", sc.Capabilities.Drop, sc.Capabilities.Add, " ", *sc.ReadOnlyRootFilesystem, " ", *sc.AllowPrivilegeEscalation),
			"10000 10000 [ALL] [NET_BIND_SERVICE] true false", ""},
		{server, "resources", res(c), "requests cpu 250m memory 50Mi, limits cpu 500m memory 200Mi", ""},
		{server, "liveness (main.go@v1.9.0 serves /healthz on -health-check-port)", probe(c.LivenessProbe), "GET /healthz port 8444 delay 10s period 5s", ""},
		{server, "mount tls", mount(ds, c.Name, "tls"), "/etc/tls", ""},
		{server, "tls volume", volume, "secret network-resources-injector-secret",
			"upstream an emptyDir the installer init container fills; server.yaml's closing comment says to use this Secret, without the init container, for a certificate made elsewhere: the lane makes it (injectorcert.go)"},
		{server, "no init container", fmt.Sprint(len(dep.Spec.Template.Spec.InitContainers)), "0",
			"upstream runs `installer -name=network-resources-injector -namespace=kube-system`, which makes its own CA, Secret and MutatingWebhookConfiguration (failurePolicy Fail) and deletes and recreates the Service (" + installer + "), outside the lane's apply and plan"},
		{installer, "Secret keys, as the installer names them", fmt.Sprint(secret.Type, " ", secretKeys), "kubernetes.io/tls [ca.crt tls.crt tls.key]",
			"the installer's Secret holds tls.crt and tls.key; the lane adds ca.crt, the caBundle, so the trust anchor can be read back"},
		{installer, "certificate DNS names (generateCSR Hosts)", strings.Join(InjectorServiceDNSNames(), " "),
			"network-resources-injector-service.kube-system.svc network-resources-injector-service network-resources-injector-service.kube-system", ""},
		{webhook, "configuration and webhook names", mwc.Name + " " + wh.Name, "network-resources-injector-config network-resources-injector-config.k8s.io", ""},
		{webhook, "client config", fmt.Sprintf("%s/%s %s", wh.ClientConfig.Service.Namespace, wh.ClientConfig.Service.Name, *wh.ClientConfig.Service.Path),
			"kube-system/network-resources-injector-service /mutate", ""},
		{webhook, "caBundle is the CA in the Secret", fmt.Sprint(bytes.Equal(wh.ClientConfig.CABundle, secret.Data["ca.crt"])), "true",
			"upstream substitutes ${CA_BUNDLE} with the cluster's client CA (scripts/webhook-patch-ca-bundle.sh@v1.9.0) for a certificate the installer signs with its own CA; the lane's caBundle is the CA that signed the Secret's certificate"},
		{webhook, "rules", strings.Join(whRules, "; "), "[CREATE] [apps ] [v1] [pods]", ""},
		{webhook, "namespace selector (kube-system, where the lane's components run, is never mutated)", nsSel, "[{kubernetes.io/metadata.name NotIn [kube-system]}]", ""},
		{webhook, "side effects, review versions", fmt.Sprint(*wh.SideEffects, wh.AdmissionReviewVersions), "None[v1]", ""},
		{webhook, "failurePolicy", string(*wh.FailurePolicy), "Ignore",
			"upstream leaves it unset, admissionregistration/v1's default Fail, and the installer defaults to Fail (cmd/installer/main.go@v1.9.0); the lane's primary CNI pods run outside kube-system and the injector needs that CNI to be reached, so Fail would deadlock the first up and any node restart (see injectorWebhookConfiguration)"},
		{repo + "deployments/pdb.yaml@" + InjectorVersion, "no PodDisruptionBudget", fmt.Sprint(slices.ContainsFunc(v.objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "PodDisruptionBudget" })), "false",
			"upstream keeps one replica through voluntary disruptions; kubevirtci does not apply it (" + kvBump + " fetches auth, server and service only) and nothing drains a lane's nodes"},
	})
}

// schemaAt is the openAPIV3Schema node of crd at path, rendered.
func schemaAt(t *testing.T, crd *unstructured.Unstructured, path ...string) string {
	t.Helper()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("%s: %d versions", crd.GetName(), len(versions))
	}
	v, _, err := unstructured.NestedFieldNoCopy(versions[0].(map[string]any), append([]string{"schema", "openAPIV3Schema"}, path...)...)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(v)
}

// schemaKeys are the property names of crd's schema node at path, sorted.
func schemaKeys(t *testing.T, crd *unstructured.Unstructured, path ...string) string {
	t.Helper()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	m, _, err := unstructured.NestedMap(versions[0].(map[string]any), append([]string{"schema", "openAPIV3Schema"}, path...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), " ")
}

func TestConformanceDRA(t *testing.T) {
	v := renderView(t, draOptions())
	ds := v.ds(draDaemonSet)
	plugin, init := container(ds, "plugin"), container(ds, "sriov-cni")
	spec := ds.Spec.Template.Spec
	const (
		tmpl     = draChart + "templates/dra-driver.yaml" + draChartAt
		values   = draChart + "values.yaml" + draChartAt
		helpers  = draChart + "templates/_helpers.tpl" + draChartAt
		role     = draChart + "templates/clusterrole.yaml" + draChartAt
		class    = draChart + "templates/deviceclass.yaml" + draChartAt
		crds     = draChart + "templates/sriovnetwork.k8snetworkplumbingwg.io_sriovresourcepolicies.yaml" + draChartAt
		attrsCRD = draChart + "templates/sriovnetwork.k8snetworkplumbingwg.io_deviceattributes.yaml" + draChartAt
		bump     = "kubevirt/kubevirtci hack/bump-dra-driver-sriov.sh@39bd4947ba4d"
		deploy   = "kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/sriov_components.sh@39bd4947ba4d"
		policy   = "kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/dra/sriov_dra_default_policy.yaml@39bd4947ba4d"
		kvImage  = "kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/dra/sriov_dra.yaml@39bd4947ba4d"
		consts   = "k8snetworkplumbingwg/dra-driver-sriov pkg/consts/consts.go@14490e9d438b"
		mainGo   = "k8snetworkplumbingwg/dra-driver-sriov cmd/dra-driver-sriov/main.go@14490e9d438b"
		cniGo    = "k8snetworkplumbingwg/dra-driver-sriov pkg/cni/cni.go@14490e9d438b"
	)
	var sa corev1.ServiceAccount
	v.get("ServiceAccount", draSA, &sa)
	var binding rbacv1.ClusterRoleBinding
	v.get("ClusterRoleBinding", draFullname+"-role-binding", &binding)
	var dc resourcev1.DeviceClass
	v.get("DeviceClass", DRADeviceClass, &dc)
	var policyCRD, attrs *unstructured.Unstructured
	var pol *unstructured.Unstructured
	for _, u := range v.objs {
		switch {
		case u.GetKind() == "CustomResourceDefinition" && u.GetName() == draPolicyCRD:
			policyCRD = u
		case u.GetKind() == "CustomResourceDefinition" && u.GetName() == draAttrsCRD:
			attrs = u
		case u.GetKind() == "SriovResourcePolicy":
			pol = u
		}
	}
	if policyCRD == nil || attrs == nil || pol == nil {
		t.Fatalf("DRA objects missing: policy CRD %v, attributes CRD %v, policy %v", policyCRD != nil, attrs != nil, pol != nil)
	}
	names := func(u *unstructured.Unstructured) string {
		n, _, _ := unstructured.NestedStringMap(u.Object, "spec", "names")
		scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
		return fmt.Sprint(n, " ", scope)
	}
	volumes := func(ctr corev1.Container) string {
		var out []string
		for _, m := range ctr.VolumeMounts {
			out = append(out, m.Name+" "+mount(ds, ctr.Name, m.Name)+" <- "+hostPath(ds, m.Name))
		}
		return strings.Join(out, "; ")
	}
	envs := func(c corev1.Container) string {
		var out []string
		for _, e := range c.Env {
			out = append(out, e.Name+"="+env(c, e.Name))
		}
		return strings.Join(out, " ")
	}
	checkFacts(t, []fact{
		{consts, "driver name, the DeviceClass's name and its selector", dc.Name + ": " + dc.Spec.Selectors[0].CEL.Expression,
			"sriovnetwork.k8snetworkplumbingwg.io: device.driver == 'sriovnetwork.k8snetworkplumbingwg.io'", ""},
		{class, "the DeviceClass has no config", fmt.Sprint(len(dc.Spec.Config)), "0", ""},
		{deploy, "namespace: deploy_dra creates it; the chart has none", ds.Namespace + " " + sa.Namespace + " " + pol.GetNamespace(), "dra-driver-sriov dra-driver-sriov dra-driver-sriov", ""},
		{helpers, "names for release sriov-dra (release name and chart name joined)", ds.Name + " " + sa.Name + " " + binding.RoleRef.Name,
			"sriov-dra-dra-driver-sriov-chart-kubeletplugin sriov-dra-dra-driver-sriov-chart-service-account sriov-dra-dra-driver-sriov-chart-role", ""},
		{bump, "labels without helm.sh/chart, app.kubernetes.io/version and managed-by (the script's sed)", dsLabels(ds),
			"map[app.kubernetes.io/component:kubeletplugin app.kubernetes.io/instance:sriov-dra app.kubernetes.io/name:dra-driver-sriov-chart] pods map[app.kubernetes.io/component:kubeletplugin app.kubernetes.io/instance:sriov-dra app.kubernetes.io/name:dra-driver-sriov-chart] selector map[app.kubernetes.io/component:kubeletplugin app.kubernetes.io/instance:sriov-dra app.kubernetes.io/name:dra-driver-sriov-chart]", ""},
		{role, "ClusterRole rules", rules(v, draRole),
			"[resource.k8s.io] [resourceclaims] [get]; [resource.k8s.io] [resourceclaims/status] [get list update patch]; [resource.k8s.io] [resourceclaims/driver] [associated-node:update]; [] [nodes] [get list watch]; [resource.k8s.io] [resourceslices] [get list watch create update patch delete]; [k8s.cni.cncf.io] [network-attachment-definitions] [get]; [sriovnetwork.k8snetworkplumbingwg.io] [sriovresourcepolicies] [get list watch]; [sriovnetwork.k8snetworkplumbingwg.io] [deviceattributes] [get list watch]", ""},
		{draChart + "templates/clusterrolebinding.yaml" + draChartAt, "binding", fmt.Sprint(binding.Subjects), "[{ServiceAccount  sriov-dra-dra-driver-sriov-chart-service-account dra-driver-sriov}]", ""},
		{tmpl, "pod: hostNetwork, hostPID, grace, priority, service account", fmt.Sprintln(spec.HostNetwork, spec.HostPID, *spec.TerminationGracePeriodSeconds, spec.PriorityClassName, spec.ServiceAccountName),
			"true true 30 system-node-critical sriov-dra-dra-driver-sriov-chart-service-account\n", ""},
		{values, "update strategy", string(ds.Spec.UpdateStrategy.Type), "RollingUpdate", ""},
		{tmpl, "init container: sriov-cni installs its binary and exits", init.Image + " " + string(init.ImagePullPolicy) + " " + cmdline(init) + " privileged " + privileged(init),
			"ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0 IfNotPresent --no-sleep privileged true", ""},
		{tmpl, "init container's requests", res(init), "requests cpu 10m memory 10Mi, limits cpu 0 memory 0", ""},
		{tmpl, "init container's mounts", volumes(init), "cni-bin /host/opt/cni/bin <- /opt/cni/bin; os-release /host/etc/os-release ro <- /etc/os-release", ""},
		{kvImage, "plugin image and command", plugin.Image + " " + cmdline(plugin) + " privileged " + privileged(plugin),
			"ghcr.io/k8snetworkplumbingwg/dra-driver-sriov:14490e9 /usr/bin/dra-driver-sriov privileged true", ""},
		{values, "plugin image pull policy", string(plugin.ImagePullPolicy), "IfNotPresent",
			"the chart pulls Always; the lane pins the image by tag as it does every component, so a loaded or mirrored image serves without a registry round trip each start"},
		{tmpl, "plugin env (kubevirtci sets ENABLE_DEVICE_METADATA; HEALTHCHECK_PORT only for a port >= 0, the default is -1; no LOG_FILE for an empty one)", envs(plugin),
			"CDI_ROOT=/var/run/cdi KUBELET_REGISTRAR_DIRECTORY_PATH=/var/lib/kubelet/plugins_registry KUBELET_PLUGINS_DIRECTORY_PATH=/var/lib/kubelet/plugins NRI_PLUGIN_NAME=dra-driver-sriov NRI_PLUGIN_IDX=42 DEFAULT_INTERFACE_PREFIX=vfnet CONFIGURATION_MODE=STANDALONE ENABLE_DEVICE_METADATA=true NODE_NAME=fieldRef spec.nodeName NAMESPACE=fieldRef metadata.namespace V=3 LOG_FORMAT=text ALSOLOGTOSTDERR=true", ""},
		{tmpl, "plugin mounts: k3d keeps /var/run apart from /run, and the chart's CDI, NRI and netns paths are /var/run already, where containerd keeps them", volumes(plugin),
			"plugins-registry /var/lib/kubelet/plugins_registry <- /var/lib/kubelet/plugins_registry; plugins /var/lib/kubelet/plugins <- /var/lib/kubelet/plugins; cdi /var/run/cdi <- /var/run/cdi; cri-socket /var/run/nri/nri.sock <- /var/run/nri/nri.sock; netns /var/run/netns HostToContainer <- /var/run/netns; cni-results /var/lib/cni/ <- /var/lib/cni/; cni-bin /opt/cni/bin <- /opt/cni/bin", ""},
		{cniGo, "the driver runs its NAD's plugins from /opt/cni/bin alone", hostPath(ds, "cni-bin"), "/opt/cni/bin", ""},
		{tmpl, "hostPath types", hostPathTypes(ds),
			"cni-results DirectoryOrCreate, netns DirectoryOrCreate, cri-socket Socket, plugins-registry DirectoryOrCreate, plugins DirectoryOrCreate, cdi DirectoryOrCreate, cni-bin DirectoryOrCreate, os-release File",
			"the chart types only cri-socket (Socket) and os-release (File); " + hostPathTypeWhy},
		{values, "tolerations", fmt.Sprint(spec.Tolerations), "[{ Exists   <nil>}]", "the chart tolerates no taint; " + earlyStartWhy},
		{values, "node selector", fmt.Sprint(spec.NodeSelector), "map[sriov_capable:true]",
			"the chart and kubevirtci run the driver on every node; the lane's SR-IOV components run on its SR-IOV agents, labelled sriov_capable=true, and a server has no PF to publish"},
		{crds, "policy CRD names and scope", names(policyCRD), "map[kind:SriovResourcePolicy listKind:SriovResourcePolicyList plural:sriovresourcepolicies singular:sriovresourcepolicy] Namespaced", ""},
		{crds, "a policy must have a spec", schemaAt(t, policyCRD, "required"), "[spec]", ""},
		{crds, "linkType enum", schemaAt(t, policyCRD, "properties", "spec", "properties", "configs", "items", "properties", "resourceFilters", "items", "properties", "linkType", "enum"), "[eth ib ethernet infiniband]", ""},
		{crds, "a node selector needs its terms", schemaAt(t, policyCRD, "properties", "spec", "properties", "nodeSelector", "required"), "[nodeSelectorTerms]", ""},
		{attrsCRD, "attributes CRD names and scope", names(attrs), "map[kind:DeviceAttributes listKind:DeviceAttributesList plural:deviceattributes singular:deviceattributes] Namespaced", ""},
		{attrsCRD, "an attribute's value kinds", schemaKeys(t, attrs, "properties", "spec", "properties", "attributes", "additionalProperties", "properties"), "bool bools int ints string strings version versions", ""},
		{policy, "the default policy: one empty config advertises every VF", pol.GetName() + " " + fmt.Sprint(pol.Object["spec"]), "default-policy map[configs:[map[]]]", ""},
		{mainGo, "the driver reads policies in its own namespace only", pol.GetNamespace() + " " + env(plugin, "NAMESPACE"), "dra-driver-sriov fieldRef metadata.namespace", ""},
	})
}
