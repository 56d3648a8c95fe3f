package k3drig

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

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

// networkObjects are the objects a flannel lane's up applies for its
// default network: pkg/cni's "flannel" and "multus" components, images
// through the mirror as with imageRegistryMirror. Flannel's init
// containers copy k3s's CNI plugins and flannel's into /opt/cni/bin and
// write its conflist for Multus, flanneld v0.28.9 runs with
// --kube-subnet-mgr, and Multus writes the one config containerd loads
// (/etc/cni/net.d/00-multus.conf under --flannel-backend=none) once
// flanneld has written subnet.env. flanneld reaches the API through the
// kubernetes Service, so this also needs kube-proxy on every node.
func networkObjects(ctx context.Context, t *testing.T, mirror string) []*unstructured.Unstructured {
	t.Helper()
	// The device plugin's component needs a PF name to be built; only
	// the default network's objects are applied.
	cs, err := cni.Components(ctx, cni.Options{CNI: config.CNIFlannel, PFNames: []string{"eth0"}, ImageRegistryMirror: mirror})
	if err != nil {
		t.Fatalf("building the lane's components: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, c := range cs {
		if c.Name == "flannel" || c.Name == "multus" {
			objs = append(objs, c.Objects...)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("no flannel or multus component among %d for CNI %s", len(cs), config.CNIFlannel)
	}
	return objs
}

// installNetwork applies the default network's objects as up does
// (cni.Apply).
func installNetwork(ctx context.Context, t *testing.T, restCfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	kc, err := kube.ForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cni.Apply(ctx, kc, objs, log.NewPrinter(t.Output(), true)); err != nil {
		t.Fatalf("applying the default network: %v", err)
	}
}

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
	deadline := time.Now().Add(bound.Scaled(90 * time.Second))
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
	deadline = time.Now().Add(bound.Scaled(30 * time.Second))
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
