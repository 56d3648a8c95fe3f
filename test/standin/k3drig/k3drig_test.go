package k3drig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/k3d-io/k3d/v5/pkg/client"
	"github.com/k3d-io/k3d/v5/pkg/config"
	conftypes "github.com/k3d-io/k3d/v5/pkg/config/types"
	"github.com/k3d-io/k3d/v5/pkg/config/v1alpha5"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func TestK3dCreatesStandinClusterAndDeletesIt(t *testing.T) {
	testutil.RequireRoot(t)
	docker := testutil.RequireDocker(t)
	testutil.RequireImage(t, docker, testutil.StandinK3sImage)
	testutil.RequireImage(t, docker, testutil.StandinToolsImage)
	// Component images reach the nodes as in a user's lane with
	// imageRegistryMirror: pulled through k3s's registries.yaml. k3d's own
	// image import is not used: both its modes can hang or misreport under
	// load (k3d-io/k3d issues 900, 1020, 1025; pkg/client/tools.go@v5.9.0
	// never closes the stream's pipe writers), which is why the product
	// does not use it either.
	mirror := testutil.RequireRigImageMirror(t)
	t.Setenv("K3D_IMAGE_TOOLS", testutil.StandinToolsImage)

	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(6*time.Minute))
	defer cancel()
	// A slot's lane name: what a killed run of this test left under it is
	// swept by make test (testutil.Sweep) before anything runs.
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	// The fake sysfs for the agents, mounted before they start (their
	// bind mounts take what is mounted then); its PF comes once the
	// agents' MACs are known. Registered before the cluster's cleanup, so
	// it unmounts after the containers holding it are gone.
	sysDir, sysSrv := serveSysfs(t)
	// Registered before anything exists: a failed create must not leave
	// containers, the network or the image volume on the shared dockerd.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(time.Minute))
		defer cancel()
		if removed, err := slot.Sweep(ctx, docker); err != nil {
			t.Errorf("cleanup: %v", err)
		} else if len(removed) > 0 {
			t.Logf("cleanup removed %v", removed)
		}
	})
	// Runs before the sweep (cleanups are LIFO): node logs explain
	// most failures, and are gone once the containers are.
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SRIOV_LANE_DUMP_NODE_LOGS") == "1" {
			dumpNodeLogs(t, docker, name)
		}
	})

	port := slot.Port(t)
	simple := v1alpha5.SimpleConfig{
		TypeMeta:   conftypes.TypeMeta{Kind: "Simple", APIVersion: "k3d.io/v1alpha5"},
		ObjectMeta: conftypes.ObjectMeta{Name: name},
		Servers:    1,
		Agents:     2,
		ExposeAPI:  v1alpha5.SimpleExposureOpts{Host: "127.0.0.1", HostIP: "127.0.0.1", HostPort: strconv.Itoa(port)},
		Image:      testutil.StandinK3sImage,
		Registries: v1alpha5.SimpleConfigRegistries{Config: registriesConfig(t, mirror)},
		Volumes: []v1alpha5.VolumeWithNodeFilters{
			{Volume: sysDir + ":" + rigsysfs.NodePath, NodeFilters: []string{"agent:*"}},
		},
		Options: v1alpha5.SimpleConfigOptions{
			K3dOptions: v1alpha5.SimpleConfigOptionsK3d{Wait: true, Timeout: 2 * time.Minute, DisableLoadbalancer: true},
			K3sOptions: v1alpha5.SimpleConfigOptionsK3s{
				ExtraArgs: []v1alpha5.K3sArgWithNodeFilters{
					// The product's (pkg/provider K3sDisabled).
					{Arg: "--disable=traefik", NodeFilters: []string{"server:*"}},
					{Arg: "--disable=servicelb", NodeFilters: []string{"server:*"}},
					{Arg: "--disable=metrics-server", NodeFilters: []string{"server:*"}},
					{Arg: "--flannel-backend=none", NodeFilters: []string{"server:*"}},
					{Arg: "--disable-network-policy", NodeFilters: []string{"server:*"}},
					{Arg: "--cluster-cidr=10.42.0.0/16", NodeFilters: []string{"server:*"}},
					// What the product passes its agents (pkg/provider/clusterconfig.go).
					{Arg: "--kubelet-arg=cpu-manager-policy=static", NodeFilters: []string{"agent:*"}},
					{Arg: "--kubelet-arg=kube-reserved=cpu=500m", NodeFilters: []string{"agent:*"}},
					{Arg: "--kubelet-arg=system-reserved=cpu=500m", NodeFilters: []string{"agent:*"}},
					// kubelet >= 1.35 refuses cgroup v1 (these machines) unless told;
					// harmless on cgroup v2. Every k3s node runs a kubelet.
					{Arg: "--kubelet-arg=fail-cgroupv1=false", NodeFilters: []string{"server:*", "agent:*"}},
				},
				// A label kubelet takes in --node-labels: a kubernetes.io one
				// such as node-role.kubernetes.io/worker would stop kubelet,
				// on the rig as on a real node.
				NodeLabels: []v1alpha5.LabelWithNodeFilters{
					{Label: "sriov-lane.io/rig-role=agent", NodeFilters: []string{"agent:*"}},
				},
			},
		},
	}
	rt := runtimes.Docker
	if err := config.ProcessSimpleConfig(&simple); err != nil {
		t.Fatalf("processing simple config: %v", err)
	}
	cc, err := config.TransformSimpleToClusterConfig(ctx, rt, simple, "")
	if err != nil {
		t.Fatalf("transforming config: %v", err)
	}
	if cc, err = config.ProcessClusterConfig(*cc); err != nil {
		t.Fatalf("processing cluster config: %v", err)
	}
	if err := config.ValidateClusterConfig(ctx, rt, *cc); err != nil {
		t.Fatalf("validating cluster config: %v", err)
	}

	begin := time.Now()
	if err := client.ClusterRun(ctx, rt, cc); err != nil {
		t.Fatalf("k3d ClusterRun %s: %v", name, err)
	}
	created := time.Since(begin)

	kcfg, err := client.KubeconfigGet(ctx, rt, &cc.Cluster)
	if err != nil {
		t.Fatalf("k3d KubeconfigGet: %v", err)
	}
	raw, err := clientcmd.Write(*kcfg)
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatalf("kubeconfig from k3d does not load: %v", err)
	}
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	// With --flannel-backend=none a node turns Ready only once a CNI config
	// exists (kubelet: "cni config uninitialized"): deploy Flannel behind
	// Multus, whose config comes once flanneld has leased the node a subnet.
	network := networkObjects(ctx, t, mirror)
	installNetwork(ctx, t, restCfg, network)

	var nodes []corev1.Node
	deadline := time.Now().Add(bound.Scaled(nodesReadyTimeout))
	for {
		list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			nodes = readyNodes(list.Items)
			if len(nodes) == 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 3 Ready nodes via %s, have %d (last error %v)", restCfg.Host, len(nodes), err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	ready := time.Since(begin)
	for _, n := range nodes {
		// Ready and status come from a real kubelet and containerd.
		if v := n.Status.NodeInfo.KubeletVersion; v != "v1.36.3" {
			t.Errorf("node %s: kubeletVersion %q, want v1.36.3 (a real kubelet)", n.Name, v)
		}
		if v := n.Status.NodeInfo.ContainerRuntimeVersion; v != "containerd://2.4.2" {
			t.Errorf("node %s: containerRuntimeVersion %q, want containerd://2.4.2", n.Name, v)
		}
	}

	roles := map[string]string{}
	for _, n := range nodes {
		switch {
		case n.Labels["node-role.kubernetes.io/control-plane"] == "true":
			roles[n.Name] = "server"
		case n.Labels["sriov-lane.io/rig-role"] == "agent":
			roles[n.Name] = "agent"
		}
	}
	for _, want := range []string{"k3d-" + name + "-server-0", "k3d-" + name + "-agent-0", "k3d-" + name + "-agent-1"} {
		if _, ok := roles[want]; !ok {
			t.Errorf("node %s missing or without its role label; nodes: %v", want, roles)
		}
	}

	if os.Getenv("SRIOV_LANE_DUMP_NODE_LOGS") == "1" {
		time.Sleep(3 * time.Second)
		dumpNodeLogs(t, docker, name)
	}

	t.Run("allocatable comes from kubelet", func(t *testing.T) {
		checkKubeletAllocatable(ctx, t, kc, "k3d-"+name+"-agent-0")
	})

	t.Run("a pod runs on an agent", func(t *testing.T) {
		// flanneld and the Multus daemon run on every node, so the
		// default network is there for the pod.
		wctx, cancel := context.WithTimeout(ctx, bound.Scaled(flannelRolloutTimeout))
		defer cancel()
		if err := cni.WaitDaemonSets(wctx, kc, network); err != nil {
			t.Fatal(err)
		}
		checkPodRuns(ctx, t, kc, "k3d-"+name+"-agent-1")
	})

	t.Run("agents advertise VFs of the fake sysfs", func(t *testing.T) {
		checkSRIOVResources(ctx, t, docker, kc, name, sysDir, sysSrv.Kernel)
	})

	t.Run("server restart keeps state and credentials", func(t *testing.T) {
		checkServerRestart(ctx, t, docker, kc, name)
	})

	begin = time.Now()
	if err := client.ClusterDelete(ctx, rt, &cc.Cluster, k3d.ClusterDeleteOpts{SkipRegistryCheck: true}); err != nil {
		t.Fatalf("k3d ClusterDelete: %v", err)
	}
	deleted := time.Since(begin)
	t.Logf("k3d: create %s (3 nodes Ready after %s), delete %s", created.Round(time.Millisecond), ready.Round(time.Millisecond), deleted.Round(time.Millisecond))

	left, err := testutil.K3dLeftovers(ctx, docker, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("ClusterDelete left behind: %v", left)
	}
}

// checkSRIOVResources gives agent-0 a fake PF whose MAC is its own eth0's,
// creates VFs, runs the device plugin stand-in on agent-0 and expects
// kubelet to advertise the VFs (capacity and allocatable from its device
// manager) on agent-0 only. The agents see the fake sysfs where the rig's
// lane config mounts it (test/standin/rigsysfs), and the plugin finds it
// there through its pod's /var/log, as in the product's DaemonSet; as on
// the rig, the PF's net/ shows eth0 only in agent-0's netns.
func checkSRIOVResources(ctx context.Context, t *testing.T, docker *dockerclient.Client, kc kubernetes.Interface, name, sysDir string, kernel *sysfs.Kernel) {
	agent0, agent1 := "k3d-"+name+"-agent-0", "k3d-"+name+"-agent-1"
	info, err := docker.ContainerInspect(ctx, agent0)
	if err != nil {
		t.Fatalf("inspecting %s: %v", agent0, err)
	}
	ep := info.NetworkSettings.Networks["k3d-"+name]
	if ep == nil || ep.MacAddress == "" {
		t.Fatalf("%s has no MAC on network k3d-%s", agent0, name)
	}
	pf := kernel.AddPF(sysfs.PF{Name: "eth0", MAC: ep.MacAddress})
	numvfs := filepath.Join(sysDir, "bus", "pci", "devices", pf, "sriov_numvfs")
	// The store takes effect before write(2) returns, as the kernel's.
	setVFs := func(n int) {
		t.Helper()
		f, err := os.OpenFile(numvfs, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fmt.Fprintf(f, "%d\n", n)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("writing %s: %v", numvfs, err)
		}
	}
	setVFs(3)

	const resName = "kubevirt.io/sriov_net"
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sriovdp-config", Namespace: "kube-system"},
		Data:       map[string]string{"config.json": `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","selectors":{"drivers":["iavf"]}}]}`},
	}
	if _, err := kc.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating device plugin ConfigMap: %v", err)
	}
	begin := time.Now()
	if _, err := kc.CoreV1().Pods("kube-system").Create(ctx, devicePluginPod(agent0), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating device plugin pod: %v", err)
	}
	// The first pull through the mirror is part of this wait.
	waitResource(ctx, t, kc, agent0, resName, 3, 90*time.Second)
	t.Logf("kubelet advertised 3 VFs %s after the device plugin pod was created", time.Since(begin).Round(time.Millisecond))
	if n, err := kc.CoreV1().Nodes().Get(ctx, agent1, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if q, ok := n.Status.Allocatable[corev1.ResourceName(resName)]; ok {
		t.Errorf("%s advertises %s=%s although no device plugin runs there", agent1, resName, q.String())
	}
	// Like upstream's (resources/pool_stub.go Probe@v3.11.0), the plugin's
	// devices are fixed when it starts: removing VFs now would change
	// nothing it advertises.
}

// serveSysfs mounts a fake sysfs (FUSE) with no PF yet, until the test
// ends, and returns where.
func serveSysfs(t *testing.T) (string, *sysfs.Server) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sys")
	// No log: the FUSE server answers the agents' reads until the
	// cleanup, and a test log written after the test ends panics.
	return dir, sysfs.ServeForTest(t, sysfs.ServeConfig{SysfsDir: dir})
}

// devicePluginPod runs the device plugin stand-in on node the way the
// product's DaemonSet runs the real one (pkg/cni/sriov.go: privileged, host
// network, its args, kubelet's device plugin and plugin registry dirs,
// /var/log, the config at /etc/pcidp, the device info dir); nothing else.
func devicePluginPod(node string) *corev1.Pod {
	hp := func(name, path string) corev1.Volume {
		t := corev1.HostPathDirectoryOrCreate
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	privileged := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sriov-device-plugin", Namespace: "kube-system"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			HostNetwork:  true,
			Containers: []corev1.Container{{
				Name:            "kube-sriovdp",
				Image:           cni.DevicePluginImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            []string{"--log-dir=sriovdp", "--log-level=10", "--resource-prefix=kubevirt.io", "--config-file=/etc/pcidp/config.json"},
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "devicesock", MountPath: "/var/lib/kubelet/device-plugins"},
					{Name: "plugins-registry", MountPath: "/var/lib/kubelet/plugins_registry"},
					{Name: "log", MountPath: "/var/log"},
					{Name: "config", MountPath: "/etc/pcidp", ReadOnly: true},
					{Name: "device-info", MountPath: "/var/run/k8s.cni.cncf.io/devinfo/dp"},
				},
			}},
			Volumes: []corev1.Volume{
				hp("devicesock", "/var/lib/kubelet/device-plugins"),
				hp("plugins-registry", "/var/lib/kubelet/plugins_registry"),
				hp("log", "/var/log"),
				hp("device-info", "/var/run/k8s.cni.cncf.io/devinfo/dp"),
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "sriovdp-config"}}}},
			},
		},
	}
}

// checkServerRestart restarts the server container (as dockerd would after
// a reboot, restart policy unless-stopped) and expects the kubeconfig k3d
// handed out before to keep working, the agents to heartbeat again and the
// entrypoint's drain/uncordon round trip to leave the server schedulable.
func checkServerRestart(ctx context.Context, t *testing.T, docker *dockerclient.Client, kc kubernetes.Interface, name string) {
	server, agent := "k3d-"+name+"-server-0", "k3d-"+name+"-agent-1"
	begin := time.Now()
	timeout := 10
	if err := docker.ContainerRestart(ctx, server, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatalf("restarting %s: %v", server, err)
	}
	info, err := docker.ContainerInspect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	started, err := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	if err != nil {
		t.Fatalf("parsing StartedAt %q of %s: %v", info.State.StartedAt, server, err)
	}
	// kubelet heartbeats by renewing its Lease in kube-node-lease (every
	// 10 s); its renewTime carries microseconds. One renewed after the new
	// container started was written to the restarted control plane.
	deadline := time.Now().Add(bound.Scaled(90 * time.Second))
	var last string
	for {
		l, err := kc.CoordinationV1().Leases("kube-node-lease").Get(ctx, agent, metav1.GetOptions{})
		s, serr := kc.CoreV1().Nodes().Get(ctx, server, metav1.GetOptions{})
		if err == nil && serr == nil {
			var beat time.Time
			if l.Spec.RenewTime != nil {
				beat = l.Spec.RenewTime.Time
			}
			if beat.After(started) && !s.Spec.Unschedulable {
				t.Logf("API back and %s heartbeating %s after the restart began", agent, time.Since(begin).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%s lease renewed %s, %s unschedulable=%t", agent, beat.Format(time.RFC3339Nano), server, s.Spec.Unschedulable)
		} else {
			last = fmt.Sprintf("%v / %v", err, serr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restarting %s: %s", server, last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitResource waits until node's allocatable and capacity hold want of
// res; want < 0 means the resource must be absent.
func waitResource(ctx context.Context, t *testing.T, kc kubernetes.Interface, node, res string, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound.Scaled(within))
	var last string
	for {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			a, aok := n.Status.Allocatable[corev1.ResourceName(res)]
			c, cok := n.Status.Capacity[corev1.ResourceName(res)]
			if want < 0 && !aok && !cok {
				return
			}
			if want >= 0 && aok && cok && a.Value() == want && c.Value() == want {
				return
			}
			last = fmt.Sprintf("allocatable %v (present %t), capacity %v (present %t)", a.Value(), aok, c.Value(), cok)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: want %s=%d (-1: absent), have %s", node, res, want, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readyNodes(all []corev1.Node) []corev1.Node {
	var out []corev1.Node
	for _, n := range all {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out = append(out, n)
			}
		}
	}
	return out
}

const (
	// nodesReadyTimeout bounds the wait for every node to be Ready, which
	// it is once Flannel's and Multus's pods on it have pulled their images
	// through the mirror, flanneld has leased the node's subnet and Multus
	// has written its config.
	nodesReadyTimeout = 2 * time.Minute
	// flannelRolloutTimeout bounds the wait for flanneld and the Multus
	// daemon to be ready on every node: the first subnet lease and the
	// readiness probe after.
	flannelRolloutTimeout = 2 * time.Minute
)

// dumpNodeLogs logs the tail of every node container's output.
func dumpNodeLogs(t *testing.T, docker *dockerclient.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(30*time.Second))
	defer cancel()
	cs, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", k3d.LabelClusterName+"="+name))})
	if err != nil {
		t.Logf("listing node containers for logs: %v", err)
		return
	}
	for _, c := range cs {
		rc, err := docker.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "60"})
		if err != nil {
			t.Logf("logs of %v: %v", c.Names, err)
			continue
		}
		var out, errOut bytes.Buffer
		_, _ = stdcopy.StdCopy(&out, &errOut, rc)
		rc.Close()
		t.Logf("==> %v <==\n%s%s", c.Names, out.String(), errOut.String())
	}
}
