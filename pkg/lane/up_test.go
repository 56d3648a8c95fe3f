package lane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/restmapper"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// upHost is a host as up's steps change it, through the Cluster and NICs
// they are given: where each PF is, its VFs, its lease, the pinned netns
// and whether the cluster exists. Each change is journalled as pkg/sriov
// and the steps journal it, under the same operations and records, and
// each has an undo that puts the host back.
type upHost struct {
	j      *journal.Journal
	pfs    []sriov.PF
	agents []provider.Node
	// where each PF is, by PCI address: "host" or the node it was moved to.
	where  map[string]string
	numVFs map[string]int
	leased map[string]bool
	pins   map[string]bool
	// cluster: the cluster and its registry exist.
	cluster bool
	// failAt is the call that fails: "lease", "create", "prepare", "move"
	// (the second PF's), "vfs" (the second PF's, half done), "label" (no
	// Node to label) or "deploy" (an API server that serves no type).
	failAt string
	moves  int
	vfs    int
	// onCreate, when set, is what Create does with its options first.
	onCreate func(provider.CreateOptions)
	// located is, by MAC, where Locate says a PF is; a PF not there is
	// where the host has it (in its agent unless on the host).
	located map[string]sriov.Where
	// events are the changes made and undone since the test last cleared
	// them, in order.
	events []string
}

func newUpHost(l *config.Lane, failAt string) *upHost {
	h := &upHost{where: map[string]string{}, numVFs: map[string]int{}, leased: map[string]bool{}, pins: map[string]bool{}, failAt: failAt}
	for i := range l.PFsNeeded() + 1 {
		pf := sriov.PF{Name: fmt.Sprintf("ens%df0", i+1), PCI: fmt.Sprintf("0000:0%d:00.0", i+1), MAC: fmt.Sprintf("02:00:00:00:00:0%d", i+1), TotalVFs: 7}
		h.pfs = append(h.pfs, pf)
		h.where[pf.PCI] = "host"
	}
	for i := range l.Agents {
		h.agents = append(h.agents, provider.Node{Name: provider.NodeName(l.ClusterName(), provider.RoleAgent, i), Role: provider.RoleAgent, ContainerID: fmt.Sprintf("c%d", i)})
	}
	return h
}

var errInjected = errors.New("injected failure")

func (h *upHost) fail(at string) error {
	if h.failAt == at {
		return errInjected
	}
	return nil
}

// journalled makes change between its intent and its done, as pkg/sriov
// does every host change.
func (h *upHost) journalled(op string, rec any, change func()) error {
	e, err := h.j.Begin(op, rec)
	if err != nil {
		return err
	}
	change()
	return h.j.Done(e)
}

// Cluster.

func (h *upHost) RefuseExisting(context.Context, string, bool) error { return nil }

func (h *upHost) Create(_ context.Context, _ *config.Lane, opts provider.CreateOptions) error {
	if h.onCreate != nil {
		h.onCreate(opts)
	}
	// A create that fails half way has made something: the undo removes it.
	h.cluster = true
	return h.fail("create")
}

func (h *upHost) WriteKubeconfig(_ context.Context, _, dest string) error {
	return os.WriteFile(dest, []byte("the lane's kubeconfig\n"), 0o600)
}

func (h *upHost) CopyKubectl(context.Context, string, string) error { return errors.New("not up's") }
func (h *upHost) Nodes(context.Context, string) ([]provider.Node, error) {
	return h.agents, nil
}
func (h *upHost) Agents(context.Context, string) ([]provider.Node, error) { return h.agents, nil }
func (h *upHost) PrepareAll(context.Context, string) error                { return h.fail("prepare") }
func (h *upHost) Prepare(_ context.Context, n provider.Node) error {
	h.events = append(h.events, "prepare "+n.Name)
	return nil
}
func (h *upHost) StopAgents(context.Context, string) error          { return errors.New("not up's") }
func (h *upHost) RestartAgent(context.Context, provider.Node) error { return errors.New("not up's") }
func (h *upHost) AgentsStartedBeforeServerStopped(context.Context, string) ([]provider.Node, error) {
	return nil, errors.New("not up's")
}

// NICs.

func (h *upHost) Locate(_ context.Context, agent sriov.ContainerTarget, _ sriov.PinnedTarget, mac string) (sriov.Where, error) {
	if w, ok := h.located[mac]; ok {
		return w, nil
	}
	for _, pf := range h.pfs {
		if pf.MAC == mac && h.where[pf.PCI] == agent.Name {
			return sriov.Where{InAgent: true, Name: pf.Name, State: "up"}, nil
		}
	}
	return sriov.Where{}, nil
}

func (h *upHost) Discover() ([]sriov.PF, error) { return h.pfs, nil }

func (h *upHost) Lease(_ context.Context, req sriov.Request) ([]sriov.PF, error) {
	if err := h.fail("lease"); err != nil {
		return nil, err
	}
	leased := req.Candidates[:req.Count]
	for _, pf := range leased {
		if err := h.journalled(sriov.OpLease, sriov.LeaseRecord{Lease: sriov.Lease{PCI: pf.PCI, Lane: req.Lane}}, func() { h.leased[pf.PCI] = true }); err != nil {
			return nil, err
		}
	}
	return leased, nil
}

func (h *upHost) PinNetns(_ context.Context, c sriov.ContainerTarget, path string) (sriov.PinnedTarget, error) {
	t := sriov.PinnedTarget{Path: path, Name: c.Name}
	return t, h.journalled(sriov.OpPin, sriov.PinRecord{Path: path, ContainerName: c.Name}, func() {
		h.pins[path] = true
		h.events = append(h.events, "pin "+c.Name)
	})
}

func (h *upHost) MovePF(_ context.Context, pf sriov.PF, t sriov.NetnsTarget) (string, error) {
	if h.moves++; h.moves == 2 {
		if err := h.fail("move"); err != nil {
			return "", err
		}
	}
	rec := sriov.MoveRecord{Function: "PF", PCI: pf.PCI, MAC: pf.MAC, Name: pf.Name, MovedAs: pf.Name, Target: t.Spec(), TargetDesc: t.String(), PF: &pf}
	return pf.Name, h.journalled(sriov.OpMove, rec, func() {
		h.where[pf.PCI] = t.String()
		h.events = append(h.events, "move "+pf.Name+" into "+t.String())
	})
}

func (h *upHost) ConfigureVFs(_ context.Context, pf sriov.PF, opts sriov.VFOptions) ([]sriov.VF, error) {
	e, err := h.j.Begin(sriov.OpNumVFs, sriov.NumVFsRecord{PCI: pf.PCI, Count: opts.Count})
	if err != nil {
		return nil, err
	}
	h.numVFs[pf.PCI] = opts.Count
	h.events = append(h.events, fmt.Sprintf("%d VFs on %s", opts.Count, pf.Name))
	if h.vfs++; h.vfs == 2 {
		if err := h.fail("vfs"); err != nil {
			return nil, err // the VFs are made, the done never written
		}
	}
	return make([]sriov.VF, opts.Count), h.j.Done(e)
}

// undoers put the host back; a lane's own files go back through the
// lane's real undo of them.
func (h *upHost) undoers() journal.Undoers {
	back := func(f func(rec map[string]any)) journal.UndoFunc {
		return journal.UndoRecord(func(_ context.Context, rec map[string]any) (string, error) { f(rec); return "", nil })
	}
	u := journal.Undoers{
		sriov.OpLease: back(func(r map[string]any) { delete(h.leased, r["lease"].(map[string]any)["pci"].(string)) }),
		sriov.OpPin: back(func(r map[string]any) {
			delete(h.pins, r["path"].(string))
			h.events = append(h.events, "undo pin "+r["containerName"].(string))
		}),
		sriov.OpMove: back(func(r map[string]any) {
			h.where[r["pci"].(string)] = "host"
			h.events = append(h.events, "undo move "+r["name"].(string))
		}),
		sriov.OpNumVFs: back(func(r map[string]any) {
			h.numVFs[r["pci"].(string)] = 0
			h.events = append(h.events, "undo VFs on "+r["pci"].(string))
		}),
		provider.OpCluster:  back(func(map[string]any) { h.cluster = false }),
		provider.OpRegistry: back(func(map[string]any) { h.cluster = false }),
		// Held in the state dir; giving back the host's values writes
		// /proc/sys, which no unit test does.
		OpHostSysctls: back(func(map[string]any) {}),
	}
	u[OpFile] = laneUndoers()[OpFile]
	return u
}

// kubeFor is the lane's API server: its Nodes, unless a test wants none
// to label, and a discovery that fails, so the first object up applies
// fails.
func (h *upHost) kubeFor(string) (*kube.Clients, error) {
	var objs []runtime.Object
	if h.failAt != "label" {
		for _, a := range h.agents {
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.Name}})
		}
	}
	typed := fake.NewClientset(objs...)
	typed.PrependReactor("get", "group", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server answers no discovery")
	})
	return &kube.Clients{
		Typed:   typed,
		Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(typed.Discovery())),
	}, nil
}

// upOnFakes runs up's steps after preflight, as Up does, on h; retain is
// --retain.
func upOnFakes(t *testing.T, l *config.Lane, h *upHost, retain bool) (string, error) {
	t.Helper()
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	h.j = j
	var out bytes.Buffer
	c := &Session{Lane: l, Journal: j, Log: log.NewPrinter(&out, false), Provider: h, SRIOV: h, undoers: h.undoers(), kubeFor: h.kubeFor, Out: &out, Retain: retain}
	_, err = c.run(context.Background(), undo, UpSteps()[1:]...)
	return out.String(), err
}

// Up's rollback at each step that changes the host or the cluster: a
// failure there, even half way through the step, leaves the host as it
// was: every PF back on the host without VFs, no lease, no pinned netns,
// no cluster, the user's kubeconfig as it was, and no lane directory.
func TestUpUndoesAFailureAtEachStep(t *testing.T) {
	for _, tc := range []struct{ failAt, step string }{
		{"lease", leaseStep.Name},
		{"create", createClusterStep.Name},
		{"prepare", prepareNodesStep.Name},
		{"move", movePFsStep.Name},
		{"vfs", vfsStep.Name},
		{"label", labelNodesStep.Name},
		{"deploy", deployComponentsStep.Name},
	} {
		t.Run(tc.failAt, func(t *testing.T) {
			l := config.Default()
			tmp := t.TempDir()
			l.StateDir = filepath.Join(tmp, "state")
			// The user's own kubeconfig, which the lane's replaces while up.
			l.Kubeconfig = filepath.Join(tmp, "home", ".kube", "config")
			if err := os.MkdirAll(filepath.Dir(l.Kubeconfig), 0o700); err != nil {
				t.Fatal(err)
			}
			const users = "the user's own kubeconfig\n"
			if err := os.WriteFile(l.Kubeconfig, []byte(users), 0o600); err != nil {
				t.Fatal(err)
			}
			h := newUpHost(l, tc.failAt)
			out, err := upOnFakes(t, l, h, false)
			if err == nil || !strings.HasPrefix(err.Error(), tc.step+": ") {
				t.Fatalf("err = %v, want it to start with the step, %q\n%s", err, tc.step, out)
			}
			if !strings.Contains(out, " ✗ "+tc.step+" (") || !strings.Contains(out, " ✓ undo (") {
				t.Errorf("progress does not show %q failing and the undo:\n%s", tc.step, out)
			}
			if got := slices.Collect(maps.Values(h.where)); slices.ContainsFunc(got, func(w string) bool { return w != "host" }) {
				t.Errorf("PFs left in nodes: %v", h.where)
			}
			for pci, n := range h.numVFs {
				if n != 0 {
					t.Errorf("%s keeps %d VFs", pci, n)
				}
			}
			if len(h.leased) != 0 || len(h.pins) != 0 || h.cluster {
				t.Errorf("left: leases %v, pinned netns %v, cluster %t", h.leased, h.pins, h.cluster)
			}
			if b, err := os.ReadFile(l.Kubeconfig); err != nil || string(b) != users {
				t.Errorf("the user's kubeconfig is %q (%v), want it as it was", b, err)
			}
			if _, err := os.Stat(l.Dir().Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the lane directory is left: %v", err)
			}
		})
	}
}

// --retain: a failed up keeps every change for down to undo, the PF it
// moved and the cluster the create made included, and the journal
// holds them all.
func TestUpRetainKeepsEveryChange(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	h := newUpHost(l, "move")
	out, err := upOnFakes(t, l, h, true)
	if err == nil || !strings.Contains(err.Error(), "retained as requested (--retain)") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if strings.Contains(out, "undo") {
		t.Errorf("a retained up undid something:\n%s", out)
	}
	moved := h.pfs[0].PCI
	// The second agent's netns is pinned before its PF's move fails.
	if !h.cluster || h.where[moved] == "host" || len(h.leased) != l.PFsNeeded() || len(h.pins) != l.Agents {
		t.Errorf("retained: cluster %t, PFs %v, leases %v, pins %v; want the cluster, the first PF in its agent, every lease and pin", h.cluster, h.where, h.leased, h.pins)
	}
	entries, err := journal.Read(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, e := range entries {
		if !e.Undone {
			ops = append(ops, e.Op)
		}
	}
	// The kubeconfig is in the lane dir: down removes it with the dir.
	for _, op := range []string{sriov.OpLease, OpHostSysctls, provider.OpCluster, provider.OpRegistry, sriov.OpPin, sriov.OpMove} {
		if !slices.Contains(ops, op) {
			t.Errorf("the journal keeps %v, lacks %s for down", ops, op)
		}
	}
}

// What the provider says while it creates the cluster goes through up's
// progress: its notes about the host always, each node's progress only
// with -v.
func TestCreateReportsThroughTheProgress(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	h := newUpHost(l, "create")
	h.onCreate = func(opts provider.CreateOptions) {
		opts.Log.Warn("host uses cgroup v1: passing kubelet fail-cgroupv1=false to every node")
		opts.Log.V(1).Infof("%s: %s", "k3d-sriov-agent-0", "running")
	}
	out, _ := upOnFakes(t, l, h, false)
	if !strings.Contains(out, "fail-cgroupv1=false") || strings.Contains(out, "running") {
		t.Errorf("without -v the note must show and progress detail must not:\n%s", out)
	}
}
