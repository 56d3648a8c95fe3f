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
	"github.com/k3d-io/k3d/v5/pkg/client"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/test/sriovtest"
)

// execIn runs argv in a node container and returns its output; a non-zero
// exit is an error carrying the output.
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
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		return out.String(), err
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

// installBridgeCNI does on every node what a CNI DaemonSet's installer
// would: copy plugins from the node's /bin to /opt/cni/bin and write a
// bridge conflist on the node's pod CIDR into /etc/cni/net.d (the
// directories containerd uses under k3s --flannel-backend=none).
func installBridgeCNI(ctx context.Context, t *testing.T, docker *dockerclient.Client, kc kubernetes.Interface, name string) {
	t.Helper()
	for _, node := range []string{"k3d-" + name + "-server-0", "k3d-" + name + "-agent-0", "k3d-" + name + "-agent-1"} {
		var cidr string
		deadline := time.Now().Add(60 * time.Second)
		for cidr == "" {
			n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err == nil && n.Spec.PodCIDR != "" {
				cidr = n.Spec.PodCIDR
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s has no pod CIDR from kube-controller-manager after 60 s (last error %v)", node, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"rig-bridge","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}}]}`, cidr)
		script := "set -e; mkdir -p /opt/cni/bin /etc/cni/net.d; cp -L /bin/bridge /bin/host-local /bin/loopback /opt/cni/bin/; " +
			"printf '%s' '" + conf + "' > /etc/cni/net.d/.10-rig.conflist.tmp; mv /etc/cni/net.d/.10-rig.conflist.tmp /etc/cni/net.d/10-rig.conflist"
		if out, err := execIn(ctx, docker, node, "sh", "-c", script); err != nil {
			t.Fatalf("installing bridge CNI in %s: %v %s", node, err, out)
		}
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

// checkPodRuns loads a locally built busybox image into the cluster the way
// k3d does (ctr images import in each node) and expects a pod pinned to
// node to run and log through kubelet.
func checkPodRuns(ctx context.Context, t *testing.T, docker *dockerclient.Client, rt runtimes.Runtime, kc kubernetes.Interface, cluster *k3d.Cluster, node string) {
	if err := sriovtest.EnsureSleeperImage(ctx, docker); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := client.ImageImportIntoClusterMulti(ctx, rt, []string{sriovtest.SleeperImage}, cluster, k3d.ImageImportOpts{Mode: k3d.ImportModeDirect}); err != nil {
		t.Fatalf("k3d image import of %s: %v", sriovtest.SleeperImage, err)
	}
	t.Logf("imported %s into the nodes in %s", sriovtest.SleeperImage, time.Since(begin).Round(time.Millisecond))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rig-pod", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{
				Name:            "sleeper",
				Image:           sriovtest.SleeperImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/busybox", "sh", "-c", "echo rig-pod-ok; exec /bin/busybox sleep 100000"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	begin = time.Now()
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
