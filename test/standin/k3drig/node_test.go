package k3drig

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// execIn runs argv in a node container and returns its output; a non-zero
// exit is an error carrying the output. The hijacked stream ignores ctx, so
// ctx's end closes it: a command that hangs fails the test instead of
// holding the package until go test's timeout.
func execIn(ctx context.Context, docker *dockerclient.Client, ctr string, argv ...string) (string, error) {
	ex, err := docker.ContainerExecCreate(ctx, ctr, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	att, err := docker.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		return out.String(), fmt.Errorf("reading output of %q in %s: %w (%v)", argv, ctr, err, ctx.Err())
	}
	insp, err := docker.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return out.String(), err
	}
	if insp.ExitCode != 0 {
		return out.String(), fmt.Errorf("%q in %s exited %d: %s", argv, ctr, insp.ExitCode, out.String())
	}
	return out.String(), nil
}

// registriesConfig is the registries.yaml a lane with imageRegistryMirror
// gets (the product's own rendering), pointing at the rig's registry.
func registriesConfig(t *testing.T, mirror string) string {
	t.Helper()
	reg, err := provider.RegistriesConfig(&config.Lane{ImageRegistryMirror: mirror})
	if err != nil || reg == "" {
		t.Fatalf("registries config for mirror %q: %q, %v", mirror, reg, err)
	}
	return reg
}

// installFlannel does what a Flannel deployment does on k3s with
// --flannel-backend=none: copy the CNI plugins rancher/k3s keeps in the
// node's /bin (flannel, bridge, host-local, loopback, portmap; cp -L) to
// /opt/cni/bin, write flannel's conflist into /etc/cni/net.d (the
// directories containerd uses then), and run flanneld v0.28.9 (built from
// its module, pulled through the rig's mirror) as a DaemonSet with
// --kube-subnet-mgr. flanneld reaches the API through the kubernetes
// Service, so this also needs kube-proxy on every node.
func installFlannel(ctx context.Context, t *testing.T, docker *dockerclient.Client, kc kubernetes.Interface, name string) {
	t.Helper()
	conf := `{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	script := "set -e; mkdir -p /opt/cni/bin /etc/cni/net.d; cp -L /bin/flannel /bin/bridge /bin/host-local /bin/loopback /bin/portmap /opt/cni/bin/; " +
		"printf '%s' '" + conf + "' > /etc/cni/net.d/.10-flannel.conflist.tmp; mv /etc/cni/net.d/.10-flannel.conflist.tmp /etc/cni/net.d/10-flannel.conflist"
	for _, node := range []string{"k3d-" + name + "-server-0", "k3d-" + name + "-agent-0", "k3d-" + name + "-agent-1"} {
		if out, err := execIn(ctx, docker, node, "sh", "-c", script); err != nil {
			t.Fatalf("installing flannel CNI config in %s: %v %s", node, err, out)
		}
	}
	ns := "kube-flannel"
	objs := []func() error{
		func() error {
			_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "flannel"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "flannel"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "flannel", Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-flannel-cfg"},
				Data:       map[string]string{"net-conf.json": `{"Network":"10.42.0.0/16","Backend":{"Type":"vxlan"}}`},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kc.AppsV1().DaemonSets(ns).Create(ctx, flannelDaemonSet(), metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatalf("creating flannel objects: %v", err)
		}
	}
}

func flannelDaemonSet() *appsv1.DaemonSet {
	privileged := true
	labels := map[string]string{"app": "flannel"}
	hp := func(name, path string, typ corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-flannel-ds"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:        true,
					ServiceAccountName: "flannel",
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            "kube-flannel",
						Image:           testutil.FlannelImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"/opt/bin/flanneld"},
						Args:            []string{"--ip-masq", "--kube-subnet-mgr"},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "CONT_WHEN_CACHE_NOT_READY", Value: "false"},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "run", MountPath: "/run/flannel"},
							{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []corev1.Volume{
						hp("run", "/run/flannel", corev1.HostPathDirectoryOrCreate),
						hp("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
						{Name: "flannel-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "kube-flannel-cfg"}}}},
					},
				},
			},
		},
	}
}

// waitFlannel waits until flanneld runs on every node (its DaemonSet fully
// available) and so has written /run/flannel/subnet.env everywhere.
func waitFlannel(ctx context.Context, t *testing.T, kc kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var last string
	for {
		ds, err := kc.AppsV1().DaemonSets("kube-flannel").Get(ctx, "kube-flannel-ds", metav1.GetOptions{})
		if err == nil && ds.Status.DesiredNumberScheduled == 3 && ds.Status.NumberAvailable == 3 {
			return
		}
		if err == nil {
			last = fmt.Sprintf("desired %d, available %d", ds.Status.DesiredNumberScheduled, ds.Status.NumberAvailable)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			pods, _ := kc.CoreV1().Pods("kube-flannel").List(ctx, metav1.ListOptions{})
			var b strings.Builder
			for _, p := range pods.Items {
				fmt.Fprintf(&b, "\n  %s on %s: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses)
				if raw, err := kc.CoreV1().Pods("kube-flannel").GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptrInt64(20)}).DoRaw(ctx); err == nil {
					fmt.Fprintf(&b, "\n%s", raw)
				}
			}
			t.Fatalf("flannel not running on every node after 120 s: %s%s", last, b.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ptrInt64(v int64) *int64 { return &v }

// checkKubeletAllocatable expects the agent's allocatable CPU to be what
// kubelet computes from the --kubelet-arg reservations the cluster was
// created with (capacity - kube-reserved - system-reserved), which no
// stand-in computes any more.
func checkKubeletAllocatable(ctx context.Context, t *testing.T, kc kubernetes.Interface, node string) {
	n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capCPU := n.Status.Capacity[corev1.ResourceCPU]
	allocCPU := n.Status.Allocatable[corev1.ResourceCPU]
	want := capCPU.DeepCopy()
	want.Sub(resource.MustParse("1")) // 500m kube-reserved + 500m system-reserved
	if allocCPU.Cmp(want) != 0 {
		t.Errorf("node %s: allocatable cpu %s, want capacity %s - 1 (kube-reserved 500m + system-reserved 500m)", node, allocCPU.String(), capCPU.String())
	}
	capMem := n.Status.Capacity[corev1.ResourceMemory]
	allocMem := n.Status.Allocatable[corev1.ResourceMemory]
	if allocMem.Cmp(capMem) > 0 || allocMem.IsZero() {
		t.Errorf("node %s: allocatable memory %s not within capacity %s", node, allocMem.String(), capMem.String())
	}
	t.Logf("node %s: capacity cpu=%s memory=%s, allocatable cpu=%s memory=%s (kubelet %s)", node,
		capCPU.String(), capMem.String(), allocCPU.String(), allocMem.String(), n.Status.NodeInfo.KubeletVersion)
}

// checkPodRuns expects a pod pinned to node, its busybox image pulled
// through the mirror, to run and log through kubelet.
func checkPodRuns(ctx context.Context, t *testing.T, kc kubernetes.Interface, node string) {

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rig-pod", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{
				Name:            "sleeper",
				Image:           cni.SmokeImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", "echo rig-pod-ok; exec sleep 100000"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	begin := time.Now()
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for {
		p, err := kc.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			if p.Spec.NodeName != node {
				t.Fatalf("pod ran on %s, want %s", p.Spec.NodeName, node)
			}
			t.Logf("pod Running on %s (IP %s) %s after creation", p.Spec.NodeName, p.Status.PodIP, time.Since(begin).Round(time.Millisecond))
			break
		}
		if err == nil {
			last = fmt.Sprintf("phase %s, node %q, conditions %v, container statuses %v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, p.Status.ContainerStatuses)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			evs, _ := kc.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			var b strings.Builder
			for _, e := range evs.Items {
				fmt.Fprintf(&b, "\n  %s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
			}
			t.Fatalf("pod not Running after 90 s: %s; events:%s", last, b.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Logs travel API server -> kubelet -> containerd: the whole path works.
	deadline = time.Now().Add(30 * time.Second)
	for {
		raw, err := kc.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil && strings.Contains(string(raw), "rig-pod-ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod logs through kubelet: %q, %v", raw, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
