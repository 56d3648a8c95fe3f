package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// parallelOnRig marks a test that brings lanes up parallel, as TestMain
// says they run (each on its own slot: rig prefix, lane names and ports),
// and requires the rig.
func parallelOnRig(t *testing.T) {
	t.Helper()
	t.Parallel()
	requireRig(t)
}

// requireRig skips t (fails it in make test's strict mode) unless this
// machine has the rig: root, Docker and the stand-in images behind the
// rig's registry mirror.
func requireRig(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	cli := testutil.RequireDockerClient(t)
	testutil.RequireImage(t, cli, testutil.StandinK3sImage)
	testutil.RequireImage(t, cli, testutil.StandinToolsImage)
	testutil.RequireRigImageMirror(t)
}

// userKubeconfig is a kubeconfig file of the user's, for an up asked to
// write the lane's kubeconfig there (--kubeconfig, outside the state dir):
// up replaces it for the lane's life and down gives it back
// (checkDownWithHeldVF).
func userKubeconfig(t *testing.T, r *rig.Rig) string {
	t.Helper()
	path := filepath.Join(r.Dir, "user-kubeconfig")
	if err := os.WriteFile(path, []byte(userKubeconfigText), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const userKubeconfigText = "# the user's own\n"

// checkUpStatus checks a default 2-agent vfio-pci lane that up just
// brought up with --kubeconfig kubeconfig: up's progress lines, the
// kubeconfig's mode, allocatable and labels read through it, and status.
func checkUpStatus(t *testing.T, r *rig.Rig, l *lane, upOutput, kubeconfig string) {
	t.Helper()
	for _, step := range []string{"lease PFs", "create cluster", "move PFs into agents", "wait for VFs"} {
		if !strings.Contains(upOutput, "✓ "+step+" (") {
			t.Errorf("no progress line with duration for %q", step)
		}
	}
	if fi, err := os.Stat(kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig %s: %v, mode %v; want 0600", kubeconfig, err, fi.Mode())
	}
	// allocatable 6 on both agents, read through the lane's kubeconfig.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, n := range []string{"k3d-" + l.cfg.Name + "-agent-0", "k3d-" + l.cfg.Name + "-agent-1"} {
		node, err := cs.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := node.Status.Allocatable["kubevirt.io/sriov_net"]
		if q.Value() != 6 {
			t.Errorf("%s allocatable kubevirt.io/sriov_net = %s, want 6", n, q.String())
		}
		if node.Labels["sriov_capable"] != "true" {
			t.Errorf("%s not labelled sriov_capable=true: %v", n, node.Labels)
		}
	}
	// status shows both PFs inside their agents, up, with 6 vfio-pci VFs.
	st := statusJSON(t, l)
	pfs, _ := st["pfs"].([]any)
	if len(pfs) != 2 {
		t.Fatalf("status lists %d PFs: %v", len(pfs), st)
	}
	seen := map[string]bool{}
	for _, p := range pfs {
		m := p.(map[string]any)
		if !strings.HasPrefix(m["node"].(string), "k3d-"+l.cfg.Name+"-agent-") || m["numVFs"].(float64) != 6 {
			t.Errorf("PF status %v", m)
		}
		if d, _ := m["vfDrivers"].(map[string]any); d["vfio-pci"] != float64(6) {
			t.Errorf("VF drivers %v", m["vfDrivers"])
		}
		// ... and each VF by its address, with its driver.
		vfs, _ := m["vfs"].([]any)
		if len(vfs) != 6 {
			t.Errorf("status lists %d VFs of %v, want 6: %v", len(vfs), m["pci"], m["vfs"])
		}
		for _, v := range vfs {
			if vf := v.(map[string]any); vf["driver"] != "vfio-pci" || vf["pci"] == "" {
				t.Errorf("VF status %v", vf)
			}
		}
		seen[m["node"].(string)] = true
	}
	if len(seen) != 2 {
		t.Errorf("both PFs in one node: %v", seen)
	}
	if _, err := netlink.LinkByName(r.State.PFs[0].Name); err == nil {
		t.Errorf("%s still in the host netns while the lane is up", r.State.PFs[0].Name)
	}
}

// checkDownWithHeldVF takes a vfio-pci lane down while a VF's VFIO group
// is held open inside an agent, as by QEMU of a running KubeVirt VM: on a
// real host the kernel blocks the VF's unbind until that process lets go.
// down stops the agents first (their netns are pinned, so the PFs stay
// reachable), then undoes the VFs, and finishes in bounded time with
// everything back, the user's kubeconfig too. A second down has nothing
// to do.
func checkDownWithHeldVF(t *testing.T, r *rig.Rig, l *lane, kubeconfig string) {
	t.Helper()
	holdVF(t, r, l)
	start := time.Now()
	res := l.down(t)
	if res.code != 0 {
		t.Fatalf("down with a held VF failed")
	}
	if took := time.Since(start); took > 90*time.Second {
		t.Errorf("down took %s", took)
	}
	if !strings.Contains(res.output, "stop agents") {
		t.Errorf("down did not stop the agents before the VFs:\n%s", res.output)
	}
	assertLaneGone(t, r, l, r.State.PFs)
	if b, _ := os.ReadFile(kubeconfig); string(b) != userKubeconfigText {
		t.Errorf("down did not give the user's kubeconfig back: %q", b)
	}
	if res := l.down(t); res.code != 0 || !strings.Contains(res.output, "nothing to do") {
		t.Errorf("second down: exit %d", res.code)
	}
}

// TestTwoLanesDisjointAndThirdFailsCleanly brings two lanes up at once
// on one rig, an ipv4 and an ipv6 one: leases keep their PFs apart, a
// third lane that finds no free PF fails before it changes the host, and
// one down --all takes both down. The ipv6 lane is the rig's check of that
// family: its pods get IPv6 addresses from the lane's pod network and
// verify passes (a VF reaches a pod). That needs what only a real node
// shows: IPv6 enabled in each node's netns before k3s starts (kube-proxy
// exits on an IPv6-primary node without it), k3s's node addresses and
// family checks, and kubelet, kube-proxy and Flannel on IPv6. One lane up
// here, not one more in a test of its own: every up is make test's time.
func TestTwoLanesDisjointAndThirdFailsCleanly(t *testing.T) {
	parallelOnRig(t)
	s := testutil.TakeSlot(t)
	r := rig.NewForTest(t, 4, s.RigPrefix())
	a := newLane(t, r, s, 0, s.RigPrefix()+"*")
	b := newLane(t, r, s, 1, s.RigPrefix()+"*")
	b.cfg.IPFamily = config.IPFamilyIPv6
	// Both lanes may take any of the 4 PFs; leases keep them apart. One
	// agent with two PFs each: the leases and the families are the point,
	// and an agent less is a node less to start on a loaded rig.
	for _, l := range []*lane{a, b} {
		rewriteAgents(t, l, 1, 2)
	}
	done := make(chan result, 2)
	for _, l := range []*lane{a, b} {
		go func(l *lane) { done <- l.upRetained(t, nil) }(l)
	}
	for i := 0; i < 2; i++ {
		if res := <-done; res.code != 0 {
			t.Fatalf("a concurrent up failed")
		}
	}
	owner := map[string]string{}
	for _, l := range []*lane{a, b} {
		for _, p := range statusJSON(t, l)["pfs"].([]any) {
			pci := p.(map[string]any)["pci"].(string)
			if prev, ok := owner[pci]; ok {
				t.Errorf("PF %s in both %s and %s", pci, prev, l.cfg.Name)
			}
			owner[pci] = l.cfg.Name
		}
	}
	if len(owner) != 4 {
		t.Errorf("lanes hold %d distinct PFs, want 4", len(owner))
	}
	assertPodIPs(t, a, false)
	assertPodIPs(t, b, true)
	if res := run(t, nil, "verify", "--config", b.path); res.code != 0 {
		t.Errorf("verify on an ipv6 lane: exit %d", res.code)
	}
	c := newLane(t, r, s, 2, s.RigPrefix()+"*")
	rewriteAgents(t, c, 1, 1)
	before := snapshot(t, r, c)
	res := run(t, nil, "up", "--config", c.path)
	if res.code != 1 || !strings.Contains(res.output, "need") {
		t.Errorf("third lane: exit %d, want 1 with the PF counts", res.code)
	}
	if d := before.diff(snapshot(t, r, c)); d != "" {
		t.Errorf("a failed up changed the host:\n%s", d)
	}
	// One command takes every lane of this state dir down.
	if res := run(t, nil, "down", "--all", "--state-dir", a.cfg.StateDir); res.code != 0 ||
		!strings.Contains(res.output, "lane "+a.cfg.Name+" is down") || !strings.Contains(res.output, "lane "+b.cfg.Name+" is down") {
		t.Errorf("down --all: exit %d", res.code)
	}
	for _, l := range []*lane{a, b} {
		assertLaneGone(t, r, l, nil)
	}
	assertLaneGone(t, r, a, r.State.PFs)
}

// assertPodIPs checks that the lane's CoreDNS pods have addresses of its
// pod network only, and of one family: IPv6 when ipv6, IPv4 otherwise.
func assertPodIPs(t *testing.T, l *lane, ipv6 bool) {
	t.Helper()
	kc, err := kube.Connect(l.cfg.Dir().Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	_, pods, err := net.ParseCIDR(l.cfg.Networks().Pods())
	if err != nil {
		t.Fatal(err)
	}
	list, err := kc.Typed.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("lane %s: CoreDNS pods: %v (%d)", l.cfg.Name, err, len(list.Items))
	}
	// up waited for CoreDNS to roll out: each of its pods is Ready, so it
	// has its addresses.
	for _, p := range list.Items {
		if len(p.Status.PodIPs) == 0 {
			t.Errorf("lane %s: pod %s has no address", l.cfg.Name, p.Name)
		}
		for _, ip := range p.Status.PodIPs {
			if a := net.ParseIP(ip.IP); a == nil || (a.To4() == nil) != ipv6 || !pods.Contains(a) {
				t.Errorf("lane %s: pod %s has %s, want only IPv6=%t addresses in %s", l.cfg.Name, p.Name, ip.IP, ipv6, pods)
			}
		}
	}
}

func rewriteAgents(t *testing.T, l *lane, agents, pfsPerNode int) {
	t.Helper()
	l.cfg.Agents, l.cfg.PFsPerNode = agents, pfsPerNode
	writeLane(t, l)
}

// TestKillAtEachStepThenDown kills `up` with SIGKILL right after each step
// that changes the host finished and checks `down` from a new process loses
// nothing. The steps go in three groups, each on a rig and lane of its own,
// in parallel: one chain of nine ups was the longest test of the package.
// "label nodes", "deploy components" and "wait for VFs" change only the
// cluster (pkg/lane/steps.go: they journal nothing), so a kill after any of
// them leaves the host and the journal as a kill after "create VFs and bind
// drivers" does, and down deletes the cluster whatever is in it: the one
// kill among them is after "deploy components", with the components' pods
// starting as down runs. The other two were two more ups of make test's
// 2 cores for the same down.
func TestKillAtEachStepThenDown(t *testing.T) {
	parallelOnRig(t)
	groups := []struct {
		name  string
		steps []string
	}{
		{"cluster", []string{"preflight", "lease PFs", "create cluster", "prepare nodes"}},
		{"PFs-and-VFs", []string{"move PFs into agents", "create VFs and bind drivers"}},
		{"components", []string{"deploy components"}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			// One agent holding both PFs: every step's undo (PF moves, VFs,
			// drivers, leases, the cluster) is there with both PFs, and a
			// node less to start on each of the group's ups.
			_, r, l := rigLane(t, 2, nil)
			rewriteAgents(t, l, 1, 2)
			for _, step := range g.steps {
				t.Run(strings.ReplaceAll(step, " ", "_"), func(t *testing.T) {
					cmd, lines := startUp(t, l)
					killed := false
					for line := range lines {
						if strings.Contains(line, "✓ "+step+" (") {
							if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
								t.Errorf("killing up at %q: %v", step, err)
							}
							killed = true
							break
						}
					}
					for range lines {
					}
					if !killed {
						t.Fatalf("up never finished step %q", step)
					}
					if res := l.down(t); res.code != 0 {
						t.Fatalf("down after kill at %q failed", step)
					}
					assertLaneGone(t, r, l, r.State.PFs)
				})
			}
		})
	}
}

func TestSIGINTUndoesByItself(t *testing.T) {
	parallelOnRig(t)
	// One agent: the interrupt and the undo are the point.
	_, r, l := rigLane(t, 1, func(c *config.Lane) { c.Agents = 1 })
	cmd, lines := startUp(t, l)
	var out []string
	for line := range lines {
		out = append(out, line)
		if strings.Contains(line, "✓ create VFs and bind drivers (") {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Errorf("interrupting up: %v", err)
			}
		}
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("up was not interrupted:\n%s", strings.Join(out, "\n"))
	}
	if !strings.Contains(strings.Join(out, "\n"), "✓ undo") {
		t.Errorf("no undo step after SIGINT:\n%s", strings.Join(out, "\n"))
	}
	assertLaneGone(t, r, l, r.State.PFs)
}

func TestBadInputChangesNothing(t *testing.T) {
	requireRig(t)
	s, r, l := rigLane(t, 2, nil)
	unknown := writeRaw(t, r, "unknown.yaml", "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nagentz: 2\n")
	unreadable := writeRaw(t, r, "unreadable.yaml", "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\n")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	// A port of the slot's, so no other test's lane is handed it.
	busyPort := strconv.Itoa(s.Port(t))
	ln, err := net.Listen("tcp", "127.0.0.1:"+busyPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A k3d cluster of the same name that is not this tool's: created, never
	// started, labelled as k3d labels its nodes.
	cli := docker(t)
	taken := s.Lane(1)
	t.Cleanup(func() {
		if err := cli.ContainerRemove(context.Background(), taken+"-fake", container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Logf("removing the fake cluster's node: %v", err)
		}
	})
	if _, err := cli.ContainerCreate(context.Background(), &container.Config{
		Image:  testutil.StandinToolsImage,
		Labels: map[string]string{"k3d.cluster": taken, "k3d.role": "server"},
	}, nil, nil, nil, taken+"-fake"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
		uid  bool
	}{
		{"unknown field", nil, []string{"up", "--config", unknown}, 2, "agentz", false},
		{"bad name", nil, []string{"up", "--config", l.path, "--name", "Bad_Name"}, 2, "name", false},
		{"zero agents", nil, []string{"up", "--config", l.path, "--agents", "0"}, 2, "agents", false},
		{"negative pfs per node", nil, []string{"up", "--config", l.path, "--pfs-per-node", "-1"}, 2, "pfsPerNode", false},
		{"zero vfs", nil, []string{"up", "--config", l.path, "--vfs-per-pf", "0"}, 2, "vfsPerPF", false},
		{"more vfs than totalvfs", nil, []string{"up", "--config", l.path, "--vfs-per-pf", "9"}, 1, "vfsPerPF=9", false},
		{"unknown cni", nil, []string{"up", "--config", l.path, "--cni", "weave"}, 2, "cni", false},
		{"unknown driver", nil, []string{"up", "--config", l.path, "--vf-driver", "igb_uio"}, 2, "vfDriver", false},
		{"missing PF", nil, []string{"up", "--config", l.path, "--pfs-include", "nosuchpf0"}, 1, "need 2", false},
		{"port in use", nil, []string{"up", "--config", l.path, "--api-port", busyPort}, 1, "in use", false},
		{"no docker", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, []string{"up", "--config", l.path}, 1, "Docker", false},
		{"unreadable config", nil, []string{"up", "--config", "/nonexistent/lane.yaml"}, 2, "--config", false},
		{"bad env", []string{"SRIOV_LANE_AGENTS=two"}, []string{"up", "--config", l.path}, 2, "SRIOV_LANE_AGENTS", false},
		{"bad flag", nil, []string{"up", "--no-such-flag"}, 2, "unknown flag", false},
		{"bad volume", nil, []string{"up", "--config", l.path, "--volume", "relative:/x"}, 2, "volumes", false},
		{"bad wait timeout", nil, []string{"up", "--config", l.path, "--wait-timeout", "soon"}, 2, "waitTimeout", false},
		{"cluster name taken", nil, []string{"up", "--config", l.path, "--name", taken}, 1, "already exists", false},
		{"not root", nil, []string{"up", "--config", l.path}, 1, "root", true},
	}
	before := snapshot(t, r, l)
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			var res result
			if tc.uid {
				res = runAsNobody(t, l, tc.args...)
			} else {
				res = run(t, tc.env, tc.args...)
			}
			if res.code != tc.code || !strings.Contains(res.output, tc.want) {
				t.Errorf("exit %d (want %d), output must mention %q:\n%s", res.code, tc.code, tc.want, res.output)
			}
			if d := before.diff(snapshot(t, r, l)); d != "" {
				t.Errorf("host changed:\n%s", d)
			}
		})
	}
}

// holdVF holds the VFIO device of the first VF of the lane's first PF from
// inside agent-0, as QEMU of a running KubeVirt VM does: vfio-hold
// (test/rig/cmd/vfio-hold) takes a device fd and closes its group, which
// is what the kernel blocks the VF's unbind on (an open group alone does
// not block: the kernel tier's scenario shows it on 6.1 and 6.12).
func holdVF(t *testing.T, r *rig.Rig, l *lane) {
	t.Helper()
	pfDir := filepath.Join(r.State.SysfsRoot, "bus/pci/devices", r.State.PFs[0].BDF)
	vfLink, err := os.Readlink(filepath.Join(pfDir, "virtfn0"))
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Base(vfLink)
	groupLink, err := os.Readlink(filepath.Join(r.State.SysfsRoot, "bus/pci/devices", vf, "iommu_group"))
	if err != nil {
		t.Fatal(err)
	}
	group := filepath.Base(groupLink)
	cli := docker(t)
	ctx := context.Background()
	agent := "k3d-" + l.cfg.Name + "-agent-0"
	copyFiles(t, cli, agent, map[string]string{"/bin/vfio-hold": vfioHold})
	exec, err := cli.ContainerExecCreate(ctx, agent, container.ExecOptions{
		Cmd: []string{"/bin/vfio-hold", "/dev/vfio", group, vf},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerExecStart(ctx, exec.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	// The holder is up once its process holds the device: the rig's fake
	// gives the device fd as the group file it was asked through.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound.Scaled(20*time.Second), true, func(context.Context) (bool, error) {
		ins, err := cli.ContainerExecInspect(ctx, exec.ID)
		if err != nil || ins.Pid <= 0 {
			return false, nil
		}
		if !ins.Running {
			return false, fmt.Errorf("vfio-hold exited %d", ins.ExitCode)
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ins.Pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", ins.Pid, fd.Name())); strings.HasSuffix(l, "/"+group) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the holder of VF %s (group %s) did not start: %v", vf, group, err)
	}
}

// TestHostSysctlsRestoredByDown changes vm.overcommit_memory on the host
// as every node's kubelet does at start (the rig's stand-in nodes keep
// their kubelets off the host's sysctls); down, the host's last lane,
// puts back the value recorded before the cluster existed. up is killed
// once its nodes run: the record is made at "create cluster", and the
// rest of up (PFs, components) adds nothing to it. The test is serial
// (the host's last lane), so every parallel e2e test waits for it: a
// whole up here was 44 s of make test's critical path.
func TestHostSysctlsRestoredByDown(t *testing.T) {
	requireRig(t)
	const key = "/proc/sys/vm/overcommit_memory"
	before, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A host sysctl left changed is a failure of the test, not a note.
		if err := os.WriteFile(key, before, 0o644); err != nil {
			t.Errorf("restoring %s: %v", key, err)
		}
	})
	_, r, l := rigLane(t, 1, nil)
	cmd, lines := startUp(t, l)
	killed := false
	for line := range lines {
		if !killed && strings.Contains(line, "✓ prepare nodes (") {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("killing up: %v", err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatal("up never finished preparing its nodes")
	}
	if err := os.WriteFile(key, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := l.down(t)
	if res.code != 0 {
		t.Fatal("down failed")
	}
	after, _ := os.ReadFile(key)
	if strings.TrimSpace(string(after)) != strings.TrimSpace(string(before)) {
		t.Errorf("vm.overcommit_memory is %s after down, was %s before up", after, before)
	}
	if strings.TrimSpace(string(before)) != "1" && !strings.Contains(res.output, "vm.overcommit_memory="+strings.TrimSpace(string(before))) {
		t.Errorf("down does not say it restored the sysctl:\n%s", res.output)
	}
	assertLaneGone(t, r, l, r.State.PFs)
}

// waitDevicePluginStarted waits until the device plugin's container on node
// runs again, started after since.
func waitDevicePluginStarted(t *testing.T, cs kubernetes.Interface, node string, since time.Time) {
	t.Helper()
	waitPluginStarted(t, cs, "kube-system", "app=sriovdp", node, since)
}

// waitPluginStarted waits until a pod of namespace and selector on node
// has a container running that started at since or later.
func waitPluginStarted(t *testing.T, cs kubernetes.Interface, namespace, selector, node string, since time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, bound.Scaled(3*time.Minute), true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil // the API server may be busy; ask again
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				// StartedAt has whole seconds.
				if r := c.State.Running; r != nil && !r.StartedAt.Time.Before(since.Truncate(time.Second)) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s pods (%s) on %s did not start again: %v", namespace, selector, node, err)
	}
}
