package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/fleet"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	lanepkg "github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/smoke"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// A fleet of SR-IOV hosts on the rig. A lane is the fleet's cluster and its
// two agents are the hosts, each holding two stand-in PFs, freed of their
// VFs as a fleet host's free PFs are. On it go what the fleet's cluster has
// already, the host-device plugin (real, built from its module, behind
// test/rig/cmd/sysfs-shim) beside the lane's Multus, and what `sriov-lane
// fleet render` prints. Three jobs from `sriov-lane fleet job`, each asking
// for both PFs of a host: two run, one a host, each with its host's two PFs
// in its netns and `sriov-lane check` in it listing exactly those; the
// third waits. A job that completes, one deleted and one force-deleted
// each give their PFs back to their host's netns, where `sriov-lane fleet
// pfs` on the host finds them free, and the next job runs on them.
func TestFleetJobsTakeWholePFs(t *testing.T) {
	parallelOnRig(t)
	assets := testutil.RequireEnvPath(t, "SRIOV_LANE_TEST_ASSETS", "the host-device plugin make test-env builds")
	hostDevice := filepath.Join(assets, "host-device")
	cli := docker(t)
	testutil.RequireImage(t, cli, testutil.StandinFleetJobImage)
	_, r, l := rigLane(t, 4, func(c *config.Lane) {
		c.Agents, c.PFsPerNode, c.VFsPerPF = 2, 2, 1
		c.WaitTimeout.Duration = testutil.CommandBound / 2
	})
	l.up(t)
	ctx := t.Context()

	// Each host's PFs, from the lane's status, freed of the VFs up made.
	hosts := map[string][]string{}
	for _, p := range statusJSON(t, l)["pfs"].([]any) {
		pf := p.(map[string]any)
		node, pci := pf["node"].(string), pf["pci"].(string)
		hosts[node] = append(hosts[node], pci)
		if err := os.WriteFile(filepath.Join(r.State.SysfsRoot, "bus/pci/devices", pci, "sriov_numvfs"), []byte("0"), 0o644); err != nil {
			t.Fatalf("freeing PF %s of its VFs: %v", pci, err)
		}
	}
	if len(hosts) != 2 {
		t.Fatalf("the lane's PFs are on %d agents, want 2: %v", len(hosts), hosts)
	}
	f := &config.Fleet{ImageRegistryMirror: l.cfg.ImageRegistryMirror, Job: config.FleetJob{
		Image: cni.MirrorImage(l.cfg.ImageRegistryMirror, testutil.StandinFleetJobImage),
		// A job holds its PFs until the test lets it end.
		Command:       []string{"/bin/sh", "-c", "until [ -e /tmp/done ]; do sleep 1; done"},
		SysfsHostPath: rigsysfs.NodePath,
	}}
	for _, node := range slices.Sorted(func(yield func(string) bool) {
		for n := range hosts {
			if !yield(n) {
				return
			}
		}
	}) {
		sort.Strings(hosts[node])
		f.Hosts = append(f.Hosts, config.FleetHost{Node: node, PFs: hosts[node]})
	}
	config.SetFleetDefaults(f) // as sriov-lane reads the file, for the test's own use of f
	fleetFile := filepath.Join(r.Dir, "fleet.yaml")
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for node := range hosts {
		copyFiles(t, cli, node, map[string]string{
			// The real plugin where sysfs-shim (RealDir) runs it from.
			"/usr/local/lib/sriov-lane-rig/cni/host-device": hostDevice,
			"/opt/cni/bin/host-device":                      sysfsShim,
			"/bin/sriov-lane":                               staticBinary,
			"/etc/sriov-lane-fleet.yaml":                    fleetFile,
		})
	}

	// The fleet's objects, as `sriov-lane fleet render | kubectl apply -f -`.
	res := run(t, nil, "fleet", "render", "--config", fleetFile, "-o", "json")
	if res.code != 0 {
		t.Fatal("fleet render failed")
	}
	var list struct{ Items []map[string]any }
	if err := json.Unmarshal([]byte(res.output), &list); err != nil {
		t.Fatalf("fleet render -o json: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, o := range list.Items {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	kc, err := kube.Connect(l.cfg.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := cni.Apply(ctx, kc, objs, log.Noop); err != nil {
		t.Fatalf("applying the fleet's objects: %v", err)
	}
	cs := kc.Typed
	waitAllocatable(t, cs, f, hosts)

	res = run(t, nil, "fleet", "job", "--config", fleetFile)
	if res.code != 0 {
		t.Fatal("fleet job failed")
	}
	var tmpl corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(res.output), &tmpl); err != nil {
		t.Fatalf("fleet job: %v", err)
	}
	jobs := &fleetJobs{t: t, cfg: restConfig(t, l.cfg.KubeconfigPath()), cs: cs, f: f, tmpl: &tmpl, cli: cli, hosts: hosts}
	t.Cleanup(jobs.deleteAll)

	a, b2, c := jobs.create(), jobs.create(), jobs.create()
	running, pending := jobs.waitSplit([]string{a, b2, c}, 2)
	if len(running) != 2 || len(pending) != 1 {
		t.Fatalf("of three jobs %d run and %d wait, want 2 and 1", len(running), len(pending))
	}
	byNode := map[string]string{}
	for _, name := range running {
		byNode[jobs.node(name)] = name
		jobs.checkHoldsHostPFs(name)
	}
	if len(byNode) != 2 {
		t.Fatalf("the two running jobs share a host: %v", byNode)
	}
	for node := range hosts {
		jobs.checkHostPFs(node, fleet.StateAway)
	}

	// Completed: the waiting job runs on the PFs it gave back (it takes
	// them as soon as they are back, so they are not looked at between).
	first := running[0]
	node := jobs.node(first)
	jobs.finish(first)
	jobs.waitRunning(pending[0], node)
	jobs.checkHoldsHostPFs(pending[0])

	// Deleted, then force-deleted: a new job runs on the PFs each gave back.
	for _, force := range []bool{false, true} {
		victim := byNode[node]
		if victim == first {
			victim = pending[0]
		}
		node = jobs.node(victim)
		jobs.remove(victim, force)
		jobs.checkHostPFs(node, fleet.StateFree)
		next := jobs.create()
		jobs.waitRunning(next, node)
		jobs.checkHoldsHostPFs(next)
		byNode[node] = next
	}
}

// waitAllocatable waits until each host's Node offers its PFs as the
// fleet's resource: the device plugin found them (it starts once the
// fleet's objects are applied).
func waitAllocatable(t *testing.T, cs kubernetes.Interface, f *config.Fleet, hosts map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(4*time.Minute))
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var off []string
		for node, pfs := range hosts {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			q := n.Status.Allocatable[corev1.ResourceName(f.Resource())]
			if q.Value() != int64(len(pfs)) {
				off = append(off, fmt.Sprintf("%s offers %s=%s, want %d", node, f.Resource(), q.String(), len(pfs)))
			}
		}
		last = strings.Join(off, "; ")
		return len(off) == 0, nil
	})
	if err != nil {
		t.Fatalf("the fleet's device plugin: %s: %v", last, err)
	}
}

// fleetJobs makes and watches the test's job pods.
type fleetJobs struct {
	t     *testing.T
	cfg   *rest.Config
	cs    kubernetes.Interface
	f     *config.Fleet
	tmpl  *corev1.Pod
	cli   *client.Client
	hosts map[string][]string
}

// ctx is the jobs' context: not the test's, which is done by the time its
// cleanups (deleteAll) run; every wait on it is bounded of its own.
func (j *fleetJobs) ctx() context.Context { return context.Background() }

func (j *fleetJobs) create() string {
	j.t.Helper()
	p, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Create(j.ctx(), j.tmpl.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		j.t.Fatalf("creating a job: %v", err)
	}
	return p.Name
}

func (j *fleetJobs) get(name string) *corev1.Pod {
	j.t.Helper()
	p, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Get(j.ctx(), name, metav1.GetOptions{})
	if err != nil {
		j.t.Fatalf("job %s: %v", name, err)
	}
	return p
}

func (j *fleetJobs) node(name string) string { return j.get(name).Spec.NodeName }

// poll waits, within a bound, until cond holds, failing with what it last
// said.
func (j *fleetJobs) poll(what string, d time.Duration, cond func(ctx context.Context) (bool, string)) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(j.ctx(), bound.Scaled(d))
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		j.t.Fatalf("%s: %s: %v", what, last, err)
	}
}

// waitSplit waits until want of names run and the rest are refused by the
// scheduler for want of PFs, and returns both sets.
func (j *fleetJobs) waitSplit(names []string, want int) (running, pending []string) {
	j.t.Helper()
	j.poll("three jobs on two hosts", 4*time.Minute, func(ctx context.Context) (bool, string) {
		running, pending = nil, nil
		var states []string
		for _, n := range names {
			p, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			states = append(states, n+": "+podState(p))
			switch {
			case p.Status.Phase == corev1.PodRunning:
				running = append(running, n)
			case unschedulable(p, j.f.Resource()):
				pending = append(pending, n)
			}
		}
		return len(running) == want && len(pending) == len(names)-want, strings.Join(states, "; ")
	})
	return running, pending
}

// waitRunning waits until the job runs on node.
func (j *fleetJobs) waitRunning(name, node string) {
	j.t.Helper()
	j.poll("job "+name+" running on "+node, 4*time.Minute, func(ctx context.Context) (bool, string) {
		p, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node, podState(p)
	})
}

// unschedulable: the scheduler found no node with the PFs free.
func unschedulable(p *corev1.Pod, resource string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return strings.Contains(c.Message, "Insufficient "+resource)
		}
	}
	return false
}

func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase) + " on " + p.Spec.NodeName
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf(" (%s: %s)", c.Type, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			s += fmt.Sprintf(" (waiting: %s %s)", w.Reason, w.Message)
		}
	}
	return s
}

// checkHoldsHostPFs: the kubelet allocated the job its host's PFs, and
// `sriov-lane check` in the job lists exactly those as candidates: the PFs
// in its netns, the other host's and none of the host's own left out.
func (j *fleetJobs) checkHoldsHostPFs(name string) {
	j.t.Helper()
	p := j.get(name)
	want := j.hosts[p.Spec.NodeName]
	env, err := j.exec(name, "env")
	if err != nil {
		j.t.Fatalf("job %s: env: %v", name, err)
	}
	envName := smoke.PCIDeviceEnvName(j.f.ResourcePrefix, j.f.ResourceName)
	var allocated []string
	for _, line := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(line, envName+"="); ok {
			allocated = strings.Split(v, ",")
		}
	}
	sort.Strings(allocated)
	if !slices.Equal(allocated, want) {
		j.t.Errorf("job %s on %s was allocated %v (%s), want its host's PFs %v", name, p.Spec.NodeName, allocated, envName, want)
	}
	// check exits 1 in the job: it has no Docker of its own running here.
	// An exec whose stream ends before the exit status arrives reads as a
	// success with whatever stdout had come (client-go
	// tools/remotecommand/errorstream.go@v0.37.2 watchErrorStream: an
	// empty error stream is nil), as once in make test: check, which only
	// reads, runs again until its own exit status is there.
	var out string
	j.poll("sriov-lane check -o json in job "+name, time.Minute, func(context.Context) (bool, string) {
		o, err := j.exec(name, "sriov-lane", "check", "-o", "json")
		var exit utilexec.ExitError
		if errors.As(err, &exit) && exit.ExitStatus() == 1 {
			out = o
			return true, ""
		}
		return false, fmt.Sprintf("want exit status 1, got %v\n%s", err, o)
	})
	var results []lanepkg.CheckResult
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		j.t.Fatalf("job %s: sriov-lane check -o json: %v\n%s", name, err, out)
	}
	var candidates []string
	for _, r := range results {
		if r.PF != nil && r.Status == lanepkg.Pass {
			candidates = append(candidates, r.PF.PCI)
		}
	}
	sort.Strings(candidates)
	if !slices.Equal(candidates, want) {
		j.t.Errorf("sriov-lane check in job %s lists candidates %v, want exactly the PFs in its netns %v\n%s", name, candidates, want, out)
	}
}

// checkHostPFs waits until `sriov-lane fleet pfs` on the host says each of
// its PFs is in state.
func (j *fleetJobs) checkHostPFs(node, state string) {
	j.t.Helper()
	j.poll("the PFs of "+node+" "+state, 2*time.Minute, func(ctx context.Context) (bool, string) {
		code, out := dockerExec(ctx, j.cli, node, "/bin/sriov-lane", "fleet", "pfs", "--config", "/etc/sriov-lane-fleet.yaml",
			"--node", node, "--sysfs-root", rigsysfs.NodePath, "-o", "json")
		var rep []fleet.PFReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return false, fmt.Sprintf("exit %d: %s", code, out)
		}
		for _, r := range rep {
			if r.State != state {
				return false, out
			}
		}
		return len(rep) == len(j.hosts[node]), out
	})
}

// finish lets the job's command end and waits until the pod Succeeded.
func (j *fleetJobs) finish(name string) {
	j.t.Helper()
	if _, err := j.exec(name, "touch", "/tmp/done"); err != nil {
		j.t.Fatalf("ending job %s: %v", name, err)
	}
	j.poll("job "+name+" completed", 2*time.Minute, func(ctx context.Context) (bool, string) {
		p, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodSucceeded, podState(p)
	})
}

// remove deletes the job, with its grace period or at once (force), and
// waits until the API has no such pod.
func (j *fleetJobs) remove(name string, force bool) {
	j.t.Helper()
	opts := metav1.DeleteOptions{}
	if force {
		opts.GracePeriodSeconds = ptr.To[int64](0)
	}
	if err := j.cs.CoreV1().Pods(j.f.JobNamespace).Delete(j.ctx(), name, opts); err != nil {
		j.t.Fatalf("deleting job %s: %v", name, err)
	}
	j.poll("job "+name+" gone", 2*time.Minute, func(ctx context.Context) (bool, string) {
		_, err := j.cs.CoreV1().Pods(j.f.JobNamespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// deleteAll ends every job and waits until each host has its PFs back
// in its netns: down must find them there, not in a pod's netns that dies
// with its node (a stand-in PF, a veth, dies with it).
func (j *fleetJobs) deleteAll() {
	ctx := context.Background()
	err := j.cs.CoreV1().Pods(j.f.JobNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: fleet.JobLabel + "=true"})
	if err != nil {
		j.t.Errorf("deleting the jobs: %v", err)
		return
	}
	for node := range j.hosts {
		j.checkHostPFs(node, fleet.StateFree)
	}
}

// exec runs cmd in the job's container through the API server and returns
// what it printed on stdout; the error says what it printed on stderr.
func (j *fleetJobs) exec(name string, cmd ...string) (string, error) {
	req := j.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(j.f.JobNamespace).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(j.cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(j.ctx(), bound.Scaled(time.Minute))
	defer cancel()
	var o, e bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &o, Stderr: &e}); err != nil {
		return o.String(), fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, e.String())
	}
	return o.String(), nil
}

// dockerExec runs argv in the container and returns its exit code and
// combined output.
func dockerExec(ctx context.Context, cli *client.Client, name string, argv ...string) (int, string) {
	created, err := cli.ContainerExecCreate(ctx, name, container.ExecOptions{Privileged: true, AttachStdout: true, AttachStderr: true, Cmd: argv})
	if err != nil {
		return -1, err.Error()
	}
	att, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, err.Error()
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		return -1, err.Error()
	}
	ins, err := cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return -1, err.Error()
	}
	if ins.ExitCode != 0 {
		return ins.ExitCode, out.String() + errOut.String()
	}
	return 0, out.String()
}
