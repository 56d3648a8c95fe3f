package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/docexample"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// Pods really run on the rig, each VF driver mode on a
// lane of its own, in parallel. Each lane then serves the checks that need
// a lane up in that mode, one after another as a CI job's would: an up on
// the rig costs far more than any check, and make test's length is the
// number of ups. A check that fails stops its lane's chain.
//
// vfio-pci, up with network-resources-injector and --kubeconfig over a file
// of the user's: up's progress, allocatable and status read through that
// kubeconfig, every component pod is Running and Ready when up returns,
// pods off the host network get addresses from the cluster CIDR and reach
// each other across agents through Flannel's VXLAN, verify gets a VF into
// a pod, reset removes what a job (and the checks before it) made, the
// injector adds the VF resource to a pod that names a network of it, and
// down, with a VF held as by a running VM, brings everything back, the
// user's file too.
//
// netdevice, on a rig standing in for an Intel 82576 (QEMU's igb), whose
// VFs the kernel binds to igbvf, a driver the device plugin's old fixed
// list did not name: up, status and verify show that
// netdevice VFs of any NIC are taken. sriov-cni (the stand-in) moves the
// VF's netdev into verify's pod; then every node container restarts, as a
// Docker daemon restart does to them (new PIDs, new network namespaces):
// the agents' old netns are
// pinned, so the stand-in PFs and their VF netdevs in them survive, and
// down brings every PF back under its name without waiting for any refund.
func TestPodsOnTheRig(t *testing.T) {
	parallelOnRig(t)
	t.Run("vfio-pci", func(t *testing.T) {
		t.Parallel()
		_, r, l := rigLane(t, 2, func(c *config.Lane) {
			// up's own wait gives up, naming what it waited for, before
			// run's bound (testutil.CommandBound) kills it.
			c.WaitTimeout.Duration = testutil.CommandBound / 2
		})
		// The lane's kubeconfig goes where the user asks, over a file of
		// theirs that down gives back.
		kubeconfig := userKubeconfig(t, r)
		res := l.example(t, docexample.Lookup(t, "SRIOV_LANE_NETWORK_RESOURCES_INJECTOR=true sriov-lane up"), "--retain", "--kubeconfig", kubeconfig)
		if res.code != 0 {
			t.Fatal("up failed")
		}
		if !strings.Contains(res.output, "✓ record baseline (") {
			t.Errorf("up recorded no baseline:\n%s", res.output)
		}
		cfg := restConfig(t, kubeconfig)
		cs := kubernetes.NewForConfigOrDie(cfg)
		afterUp := laneObjects(t, cs)
		checks := []struct {
			name string
			fn   func(t *testing.T)
		}{
			{"status", func(t *testing.T) { checkUpStatus(t, r, l, res.output, kubeconfig) }},
			{"component_pods_ready", func(t *testing.T) { assertComponentPodsReady(t, t.Context(), cs) }},
			{"pod_to_pod_across_agents", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(4*time.Minute))
				defer cancel()
				assertPodToPodAcrossAgents(t, ctx, cs, l.cfg)
			}},
			{"verify", func(t *testing.T) {
				if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
					t.Fatalf("verify in vfio-pci mode: exit %d", res.code)
				}
			}},
			// pod_to_pod_across_agents made one namespace.
			{"reset", func(t *testing.T) { checkReset(t, l, cs, afterUp, 1) }},
			{"network_resources_injector", func(t *testing.T) { checkInjector(t, l, cfg, res.output) }},
		}
		for _, c := range checks {
			if !t.Run(c.name, c.fn) {
				break
			}
		}
		checkDownWithHeldVF(t, r, l, kubeconfig)
	})
	t.Run("netdevice", func(t *testing.T) {
		t.Parallel()
		nic := sysfs.I82576
		_, r, l := rigLane(t, 2, func(c *config.Lane) { c.VFDriver = config.VFDriverNetdevice }, rig.WithVFDriver(nic.VFDriver))
		l.up(t)
		// The device plugin selected the VFs by PF name alone (no driver
		// list; up waited for allocatable), and status names each VF's
		// kernel driver: the 82576's igbvf.
		for _, p := range statusJSON(t, l)["pfs"].([]any) {
			vfs, _ := p.(map[string]any)["vfs"].([]any)
			if len(vfs) == 0 {
				t.Errorf("status lists no VFs: %v", p)
			}
			for _, v := range vfs {
				if d := v.(map[string]any)["driver"]; d != nic.VFDriver {
					t.Errorf("netdevice VF on %v, want %s: %v", d, nic.VFDriver, v)
				}
			}
		}
		if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
			t.Fatalf("verify in netdevice mode: exit %d", res.code)
		}
		cli := docker(t)
		for _, n := range []string{"server-0", "agent-0", "agent-1"} {
			if err := cli.ContainerRestart(t.Context(), "k3d-"+l.cfg.Name+"-"+n, container.StopOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		res := l.down(t)
		if res.code != 0 {
			t.Fatal("down after the nodes restarted failed")
		}
		if strings.Contains(res.output, "not found") {
			t.Errorf("down reports a lost stand-in although the netns were pinned:\n%s", res.output)
		}
		assertLaneGone(t, r, l, r.State.PFs)
	})
}

func restConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertComponentPodsReady: when up has returned, every pod of the lane's
// components is Running with every container Ready, on every node it
// belongs to.
func assertComponentPodsReady(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	want := map[string]string{ // namespace/DaemonSet -> where
		"kube-flannel/kube-flannel-ds":         "every node",
		"kube-system/kube-multus-ds":           "every node",
		"kube-system/kube-sriov-cni-ds":        "agents",
		"kube-system/kube-sriov-device-plugin": "agents",
	}
	for key, where := range want {
		ns, name, _ := strings.Cut(key, "/")
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		n := ds.Status.DesiredNumberScheduled
		if n == 0 || ds.Status.NumberReady != n {
			t.Errorf("%s (%s): %d of %d pods ready", key, where, ds.Status.NumberReady, n)
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %s/%s is %s", p.Namespace, p.Name, p.Status.Phase)
			}
			for _, c := range p.Status.ContainerStatuses {
				if !c.Ready {
					t.Errorf("pod %s/%s container %s not ready", p.Namespace, p.Name, c.Name)
				}
			}
		}
	}
}

// assertPodToPodAcrossAgents starts a pod on agent-1 and, on agent-0, a pod
// that pings it and exits: Succeeded means the packets crossed Flannel's
// VXLAN between the two agent containers.
func assertPodToPodAcrossAgents(t *testing.T, ctx context.Context, cs kubernetes.Interface, l *config.Lane) {
	t.Helper()
	ns := "e2e-pods"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	image := cni.MirrorImage(l.ImageRegistryMirror, cni.SmokeImage)
	pod := func(name, node string, cmd ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName:                      node,
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "c", Image: image, Command: cmd}},
			},
		}
	}
	agent := func(i int) string { return fmt.Sprintf("k3d-%s-agent-%d", l.Name, i) }
	waitDefaultServiceAccount(t, cs, ns)
	target, err := cs.CoreV1().Pods(ns).Create(ctx, pod("target", agent(1), "sleep", "3600"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip = p.Status.PodIP
		return p.Status.Phase == corev1.PodRunning && ip != "", nil
	}); err != nil {
		t.Fatalf("pod %s/target on %s never ran: %v", ns, agent(1), err)
	}
	_, cidr, _ := net.ParseCIDR(clusterCIDR(l))
	if addr := net.ParseIP(ip); addr == nil || !cidr.Contains(addr) {
		t.Errorf("pod IP %q is not in the cluster CIDR %s", ip, cidr)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("pinger", agent(0), "ping", "-c", "3", "-W", "5", ip), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "pinger", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}); err != nil || phase != corev1.PodSucceeded {
		t.Errorf("a pod on %s pinging %s on %s: %s (%v)", agent(0), ip, agent(1), phase, err)
	}
}

// clusterCIDR is the IPv4 pod CIDR of the lane's k3s (ipFamily ipv4).
func clusterCIDR(l *config.Lane) string {
	if l.CNI == config.CNICalico {
		return config.CalicoPodCIDRv4
	}
	return config.FlannelPodCIDRv4
}
