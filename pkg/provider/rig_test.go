package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/containerns"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// rig sets up a provider against the real dockerd with the stand-in images.
func rig(t *testing.T) (*Provider, *client.Client) {
	t.Helper()
	p, cli := rigDocker(t)
	testutil.RequireImage(t, cli, testutil.StandinK3sImage)
	testutil.RequireImage(t, cli, testutil.StandinToolsImage)
	return p, cli
}

// rigDocker is rig for tests that need no node image.
func rigDocker(t *testing.T) (*Provider, *client.Client) {
	t.Helper()
	testutil.RequireRoot(t)
	cli := testutil.RequireDocker(t)
	// k3d reads its tools image only from the environment.
	t.Setenv(envToolsImage, testutil.StandinToolsImage)
	return NewWithClient(cli), cli
}

// dockerOnly is rigDocker for a test that reaches Docker alone, never the
// k3d library: it sets no environment (the k3d tools image, TMPDIR for
// k3d's hosts files), so the test can run in parallel, and does.
func dockerOnly(t *testing.T) (*Provider, *client.Client) {
	t.Helper()
	testutil.RequireRoot(t)
	cli := testutil.RequireDockerClient(t)
	return NewWithClient(cli), cli
}

// testLane is a lane named and given its API port by slot, on stand-in
// images, whose state (machine-ids) and VFIO dir live in the test's temp
// dir. vfio is a plain file standing for the VFIO container device, so
// Prepare's chmod can be observed from the host.
func testLane(t *testing.T, slot *testutil.Slot, agents int) *config.Lane {
	t.Helper()
	dir := t.TempDir()
	vfio := filepath.Join(dir, "vfio")
	if err := os.MkdirAll(vfio, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vfio, "vfio"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := config.Default()
	l.Name = slot.Lane(0)
	l.Agents = agents
	l.K3sImage = testutil.StandinK3sImage
	l.ToolsImage = testutil.StandinToolsImage
	l.APIPort = slot.Port(t)
	l.Registry.Enabled = new(bool)
	l.StateDir = filepath.Join(dir, "state")
	l.VFIODir = vfio
	// Create's waits under make test's load: a cluster has taken over 3
	// minutes to come up there (testutil.CommandBound says more).
	l.WaitTimeout.Duration = testutil.CommandBound / 2
	if err := config.Validate(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// cleanupLane registers removal of everything a lane may leave, and checks
// afterwards that nothing is left. Register it before Create.
func cleanupLane(t *testing.T, p *Provider, cli *client.Client, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(2*time.Minute))
		defer cancel()
		if err := p.Delete(ctx, name); err != nil {
			t.Errorf("cleanup of %s: %v", name, err)
		}
		if left := leftovers(ctx, t, cli, name); len(left) > 0 {
			t.Errorf("after cleanup of %s these remain: %v", name, left)
		}
	})
}

// leftovers lists every Docker object of the lane that still exists: what
// testutil.K3dLeftovers finds of the cluster, and the lane's registry and
// first nodes by name, which a failed create may leave unlabelled.
func leftovers(ctx context.Context, t *testing.T, cli *client.Client, name string) []string {
	t.Helper()
	left, err := testutil.K3dLeftovers(ctx, cli, name, RegistryName(name), NodeName(name, RoleServer, 0), NodeName(name, RoleAgent, 0))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// progressLog records the progress lines Create logs ("node: state" at
// V(1)), read back from what a verbose printer writes.
type progressLog struct {
	t      *testing.T
	mu     sync.Mutex
	events map[string][]string
}

func (pl *progressLog) logger(t *testing.T) log.Logger {
	pl.t, pl.events = t, map[string][]string{}
	return log.NewPrinter(pl, true)
}

// Write takes one printed line: the printer writes each in one call.
func (pl *progressLog) Write(p []byte) (int, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	line := strings.TrimSpace(string(p))
	pl.t.Logf("progress %s", line)
	if node, state, ok := strings.Cut(line, ": "); ok {
		pl.events[node] = append(pl.events[node], state)
	}
	return len(p), nil
}

func nsInode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func hostNetnsInode(t *testing.T) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestRigCreateInspectRestartDelete creates a cluster of 1 server and 2
// agents with the lane's registry (the default) and the datastore on the
// server's own disk, inspects it (nodes, netns, log tail, machine-ids,
// Prepare, kubeconfig, kubectl, the registry from each node, Load),
// restarts an agent and deletes it all, twice. One cluster for all of it:
// a cluster on the rig costs more than every check, and none touches
// another's.
func TestRigCreateInspectRestartDelete(t *testing.T) {
	p, cli := rig(t)
	testutil.RequireImage(t, cli, testutil.StandinRegistryImage)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	l := testLane(t, slot, 2)
	l.Registry.Enabled = nil // default: on
	l.Registry.Image = testutil.StandinRegistryImage
	l.Registry.Address = fmt.Sprintf("127.0.0.1:%d", slot.Port(t))
	l.Server.DatastoreOnTmpfs = new(bool)
	if err := config.Validate(l); err != nil {
		t.Fatal(err)
	}
	cleanupLane(t, p, cli, name)
	ctx := context.Background()

	var pl progressLog
	start := time.Now()
	if err := p.Create(ctx, l, CreateOptions{Log: pl.logger(t)}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Logf("TIMING create %s (1 server + 2 agents and a registry, stand-in): %s", name, time.Since(start).Round(time.Millisecond))
	assertDatastoreOnDisk(t, cli, name)

	nodes, err := p.Nodes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{NodeName(name, RoleServer, 0), NodeName(name, RoleAgent, 0), NodeName(name, RoleAgent, 1)}
	if len(nodes) != len(want) {
		t.Fatalf("nodes %v, want %v", nodes, want)
	}
	hostIno := hostNetnsInode(t)
	inodes := map[uint64]string{}
	for i, n := range nodes {
		if n.Name != want[i] {
			t.Errorf("node %d is %s, want %s", i, n.Name, want[i])
		}
		if wantRole := map[bool]string{true: RoleServer, false: RoleAgent}[i == 0]; n.Role != wantRole {
			t.Errorf("%s role %s, want %s", n.Name, n.Role, wantRole)
		}
		if got := pl.events[n.Name]; len(got) == 0 || got[len(got)-1] != "ready" {
			t.Errorf("progress for %s: %v, want it to end with ready", n.Name, got)
		}
		pid, err := containerns.PID(ctx, cli, n.ContainerID)
		if err != nil || pid <= 1 {
			t.Fatalf("%s pid %d: %v", n.Name, pid, err)
		}
		h, err := containerns.Open(ctx, cli, n.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		ino := nsInode(t, int(h))
		h.Close()
		if ino == hostIno {
			t.Errorf("%s netns is the host's", n.Name)
		}
		if other, dup := inodes[ino]; dup {
			t.Errorf("%s shares its netns with %s", n.Name, other)
		}
		inodes[ino] = n.Name
	}

	// What a failed create would quote: the end of the node's log, at most
	// logTailLines of it (kubelet logs to the node's stderr, as in k3s, so
	// k3d's ready line is soon out of the tail).
	tail, err := p.logTail(ctx, nodes[0].ContainerID, logTailLines)
	whole, werr := p.logTail(ctx, nodes[0].ContainerID, 1<<20)
	if err != nil || werr != nil || strings.TrimSpace(tail) == "" || strings.Count(tail, "\n") > logTailLines ||
		!strings.HasSuffix(whole, tail) || !strings.Contains(whole, "k3s is up and running") {
		t.Errorf("log tail of %s (%v, %v):\n%s", nodes[0].Name, err, werr, tail)
	}

	// Distinct machine-ids, the ones written on the host.
	ids := map[string]string{}
	for _, n := range nodes {
		r, err := p.exec(ctx, n.ContainerID, []string{"cat", "/etc/machine-id"}, nil)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("reading machine-id of %s: %v %+v", n.Name, err, r)
		}
		host, err := os.ReadFile(l.Dir().MachineID(n.Name))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stdout != string(host) || len(strings.TrimSpace(r.Stdout)) != 32 {
			t.Errorf("%s machine-id %q, host file %q", n.Name, r.Stdout, host)
		}
		if other, dup := ids[r.Stdout]; dup {
			t.Errorf("%s and %s share machine-id %s", n.Name, other, r.Stdout)
		}
		ids[r.Stdout] = n.Name
	}

	// Prepare: / becomes shared, the VFIO device world-writable.
	vfioFile := filepath.Join(l.VFIODir, "vfio")
	for _, n := range nodes {
		if err := p.Prepare(ctx, n); err != nil {
			t.Fatalf("prepare: %v", err)
		}
		r, err := p.exec(ctx, n.ContainerID, []string{"cat", "/proc/self/mountinfo"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !rootShared(r.Stdout) {
			t.Errorf("%s: / is not shared after Prepare:\n%s", n.Name, r.Stdout)
		}
	}
	if st, err := os.Stat(vfioFile); err != nil || st.Mode().Perm() != 0o666 {
		t.Errorf("VFIO device after Prepare: %v %v, want mode 0666", st.Mode(), err)
	}

	// Kubeconfig and kubectl.
	kcPath := filepath.Join(t.TempDir(), "sub", ".kubeconfig")
	if err := p.WriteKubeconfig(ctx, name, kcPath); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kcPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v %v, want 0600", st.Mode(), err)
	}
	kc, err := clientcmd.LoadFromFile(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server, fmt.Sprintf("https://127.0.0.1:%d", l.APIPort); got != want {
		t.Errorf("kubeconfig server %s, want %s", got, want)
	}
	kubectl := filepath.Join(t.TempDir(), "kubectl")
	if err := p.CopyKubectl(ctx, name, kubectl); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(kubectl)
	if err != nil || st.Mode().Perm() != 0o755 || st.Size() < 1024 {
		t.Errorf("kubectl %v %v", st, err)
	}
	if b, _ := os.ReadFile(kubectl); !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Errorf("kubectl is not an ELF binary")
	}

	// The lane's registry, from the host and from every node.
	resp, err := http.Get("http://" + l.Registry.Address + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ on the host port: %s", resp.Status)
	}
	ins, err := cli.ContainerInspect(ctx, RegistryName(name))
	if err != nil {
		t.Fatal(err)
	}
	ep := ins.NetworkSettings.Networks[NetworkName(name)]
	if ep == nil || !slices.Contains(ep.Aliases, RegistryAlias) {
		t.Errorf("registry not on %s with alias %s: %+v", NetworkName(name), RegistryAlias, ep)
	}
	for _, n := range nodes {
		r, err := p.exec(ctx, n.ContainerID, []string{"cat", "/etc/rancher/k3s/registries.yaml"}, nil)
		if err != nil || !strings.Contains(r.Stdout, "http://registry:5000") {
			t.Errorf("%s registries.yaml: %v %q", n.Name, err, r.Stdout)
		}
		// From the node, by name, on the cluster network, through the
		// node's resolv.conf: k3d's DNS fix points it at the network's
		// gateway and redirects that to Docker's embedded DNS with the
		// node's (real) iptables.
		r, err = p.exec(ctx, n.ContainerID, []string{"nslookup", RegistryAlias}, nil)
		if err != nil || r.ExitCode != 0 {
			t.Errorf("%s cannot resolve %s: %v %+v", n.Name, RegistryAlias, err, r)
			continue
		}
		ip := lastAddress(r.Stdout)
		r, err = p.exec(ctx, n.ContainerID, []string{"wget", "-q", "-O", "-", "http://" + net.JoinHostPort(ip, registryInternalPort) + "/v2/"}, nil)
		if err != nil || r.ExitCode != 0 {
			t.Errorf("%s cannot reach registry at %s:5000: %v %+v", n.Name, ip, err, r)
		}
	}

	// Load with k3s's real import command: the nodes' containerd must then
	// list the image.
	start = time.Now()
	if err := p.Load(ctx, name, testutil.StandinToolsImage); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING load of %s into %d nodes: %s", testutil.StandinToolsImage, len(nodes), time.Since(start).Round(time.Millisecond))
	for _, n := range nodes {
		r, err := p.exec(ctx, n.ContainerID, []string{"ctr", "-n", "k8s.io", "images", "ls", "-q"}, nil)
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Stdout, testutil.StandinToolsImage) {
			t.Errorf("%s: image %s not in containerd after load: %v %+v", n.Name, testutil.StandinToolsImage, err, r)
		}
	}
	// A failing import names each node and carries the command's exit.
	p.importCmd = []string{"sh", "-c", "cat >/dev/null; exit 3"}
	err = p.Load(ctx, name, testutil.StandinToolsImage)
	if err == nil {
		t.Error("load succeeded with an import command that fails")
	} else {
		for _, n := range nodes {
			if !strings.Contains(err.Error(), n.Name) {
				t.Errorf("load error does not name %s", n.Name)
			}
		}
		if !strings.Contains(err.Error(), "exited with") {
			t.Errorf("load error does not carry the import command's exit: %v", err)
		}
	}
	if err := p.Load(ctx, name, "sriov-lane-standin/does-not-exist:x"); err == nil || !strings.Contains(err.Error(), "not on the host") {
		t.Errorf("load of a missing image: %v", err)
	}

	// Restart an agent: the handle must follow the new PID and netns.
	agent := nodes[1]
	oldPid, _ := containerns.PID(ctx, cli, agent.ContainerID)
	oldH, err := containerns.Open(ctx, cli, agent.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	// Held open across the restart: a freed namespace's inode number is
	// reused, and the comparison below would be meaningless.
	defer oldH.Close()
	oldIno := nsInode(t, int(oldH))
	if err := cli.ContainerRestart(ctx, agent.ContainerID, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	newPid, err := containerns.PID(ctx, cli, agent.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if newPid == oldPid {
		t.Errorf("%s pid %d unchanged by restart", agent.Name, newPid)
	}
	h, err := containerns.Open(ctx, cli, agent.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if ino := nsInode(t, int(h)); ino == oldIno || ino == hostIno {
		t.Errorf("%s netns after restart: inode %d (old %d, host %d)", agent.Name, ino, oldIno, hostIno)
	}
	h.Close()

	start = time.Now()
	if err := p.Delete(ctx, name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	t.Logf("TIMING delete %s: %s", name, time.Since(start).Round(time.Millisecond))
	if left := leftovers(ctx, t, cli, name); len(left) > 0 {
		t.Errorf("after delete: %v", left)
	}
	if _, err := cli.ContainerInspect(ctx, RegistryName(name)); !cerrdefs.IsNotFound(err) {
		t.Errorf("registry survived delete: %v", err)
	}
	start = time.Now()
	if err := p.Delete(ctx, name); err != nil {
		t.Errorf("second delete: %v", err)
	}
	t.Logf("TIMING second delete %s: %s", name, time.Since(start).Round(time.Millisecond))
	if _, err := containerns.Open(ctx, cli, agent.ContainerID); err == nil {
		t.Error("netns of a deleted node opened")
	}
}

// rootShared reports whether the mount at / has a shared peer group.
// The last mount on / is the visible one.
func rootShared(mountinfo string) bool {
	shared := false
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != "/" {
			continue
		}
		shared = false
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	return shared
}

// missingImageLane is a one-agent lane whose k3s image does not exist, so
// its create fails at the first node, and the lane is cleaned up after.
func missingImageLane(t *testing.T) (*Provider, *client.Client, string, *config.Lane) {
	t.Helper()
	p, cli := rigDocker(t)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	l := testLane(t, slot, 1)
	l.K3sImage = "sriov-lane-standin/does-not-exist:x"
	l.WaitTimeout.Duration = time.Minute
	cleanupLane(t, p, cli, name)
	return p, cli, name, l
}

// createFails runs a create of l that must fail (what says with what),
// logs how long it took and its error, and returns the error's text.
func createFails(t *testing.T, p *Provider, l *config.Lane, opts CreateOptions, what string) string {
	t.Helper()
	start := time.Now()
	err := p.Create(context.Background(), l, opts)
	t.Logf("TIMING failed create %s: %s", l.Name, time.Since(start).Round(time.Millisecond))
	if err == nil {
		t.Fatalf("create with %s succeeded", what)
	}
	t.Logf("error: %v", err)
	return err.Error()
}

// undoCreate undoes the create of l's cluster as the lane's journal does
// once the create has returned (its entries done), and returns the
// undo's error.
func undoCreate(t *testing.T, p *Provider, l *config.Lane) error {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ops := []string{OpCluster}
	if l.RegistryEnabled() {
		ops = append(ops, OpRegistry)
	}
	for _, op := range ops {
		e, err := j.Begin(op, ClusterRecord{Name: l.ClusterName()})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Done(e); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(2*time.Minute))
	defer cancel()
	return journal.Reverse(ctx, j, Undoers(p), journal.ReverseOptions{})
}

// A failed create leaves what it made (network, image volume, machine-ids)
// to the one owner of cleaning up after it, the lane journal's undo (which
// --retain holds back for debugging), and that undo leaves nothing.
func TestRigCreateFailureLeftToTheJournal(t *testing.T) {
	p, cli, name, l := missingImageLane(t)
	ctx := context.Background()
	msg := createFails(t, p, l, CreateOptions{}, "a missing image")
	if !strings.Contains(msg, NodeName(name, RoleServer, 0)) {
		t.Errorf("error does not name the failing node %s", NodeName(name, RoleServer, 0))
	}
	left := leftovers(ctx, t, cli, name)
	if !slices.ContainsFunc(left, func(o string) bool { return strings.HasPrefix(o, "network "+NetworkName(name)+" ") }) {
		t.Errorf("failed create left %v, want at least its network %s", left, NetworkName(name))
	}
	if _, err := os.Stat(l.Dir().MachineIDs()); err != nil {
		t.Errorf("failed create removed its machine-id files: %v", err)
	}
	if err := undoCreate(t, p, l); err != nil {
		t.Fatalf("undo of the failed create: %v", err)
	}
	if left := leftovers(ctx, t, cli, name); len(left) > 0 {
		t.Errorf("the undo of a failed create left %v", left)
	}
}

// A node that starts but never gets ready: the error must name it and
// quote its log, and its undo must leave nothing.
func TestRigCreateNodeNeverReady(t *testing.T) {
	p, cli := rig(t)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	l := testLane(t, slot, 1)
	// The tools image runs but is no k3s: the server never logs ready
	// (it prints nothing either, so the quoted log is empty; that the
	// tail is read at all is checked in TestRigCreateInspectRestartDelete).
	l.K3sImage = testutil.StandinToolsImage
	l.WaitTimeout.Duration = 30 * time.Second
	cleanupLane(t, p, cli, name)
	ctx := context.Background()
	msg := createFails(t, p, l, CreateOptions{}, "a non-k3s node image")
	if !strings.Contains(msg, "node "+NodeName(name, RoleServer, 0)) {
		t.Errorf("error does not name node %s", NodeName(name, RoleServer, 0))
	}
	if !strings.Contains(msg, fmt.Sprintf("last %d log lines:", logTailLines)) {
		t.Errorf("error carries no log section for the node")
	}
	if err := undoCreate(t, p, l); err != nil {
		t.Fatalf("undo of the failed create: %v", err)
	}
	if left := leftovers(ctx, t, cli, name); len(left) > 0 {
		t.Errorf("the undo of a failed create left %v", left)
	}
}

func TestRigUndoersGoneIsSuccess(t *testing.T) {
	t.Parallel() // Docker alone, and mostly a wait on interruptedCreateBound
	p, _ := dockerOnly(t)
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// The slot's lane name, which no other test creates while this one runs.
	gone := testutil.TakeSlot(t).Lane(0)
	for _, op := range []string{OpCluster, OpRegistry} {
		if _, err := j.Begin(op, ClusterRecord{Name: gone}); err != nil {
			t.Fatal(err)
		}
	}
	var notes []string
	err = journal.Reverse(context.Background(), j, Undoers(p), journal.ReverseOptions{Report: func(e *journal.Entry, note string, err error) {
		notes = append(notes, note)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Pending()) != 0 || len(notes) != 2 {
		t.Fatalf("pending %d, notes %v", len(j.Pending()), notes)
	}
	for _, n := range notes {
		if !strings.Contains(n, "already gone") {
			t.Errorf("note %q does not say the object was gone", n)
		}
	}
}

// lastAddress returns the last IPv4 address in nslookup's output (the first
// is the resolver's).
func lastAddress(out string) string {
	var ip string
	for _, f := range strings.Fields(out) {
		if a := net.ParseIP(f); a != nil && a.To4() != nil {
			ip = f
		}
	}
	return ip
}

// Delete goes by name, but must not remove a container that merely has the
// registry's name without the lane's label.
func TestRigDeleteSparesForeignRegistryName(t *testing.T) {
	p, cli := rig(t)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	ctx := context.Background()
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), RegistryName(name), container.RemoveOptions{Force: true})
	})
	if _, err := cli.ContainerCreate(ctx, &container.Config{Image: testutil.StandinToolsImage}, nil, nil, nil, RegistryName(name)); err != nil {
		t.Fatal(err)
	}
	err := p.Delete(ctx, name)
	if !errors.Is(err, errNotOurs) {
		t.Errorf("delete with a foreign %s: %v, want errNotOurs", RegistryName(name), err)
	}
	if _, err := cli.ContainerInspect(ctx, RegistryName(name)); err != nil {
		t.Errorf("foreign container removed: %v", err)
	}
	l := testLane(t, slot, 1)
	l.Registry.Enabled = nil
	if err := p.Create(ctx, l, CreateOptions{}); !errors.Is(err, ErrExists) {
		t.Errorf("create over a foreign registry container: %v, want ErrExists", err)
	}
}

// A down killed mid-delete leaves Docker removing a node: the container is
// gone from Docker's list a moment before its volumes are released. Delete
// waits that out, removes a node of the lane that holds it, and reports a
// volume held for good by anything else.
func TestRigDeleteWaitsForAVolumeBeingReleased(t *testing.T) {
	t.Parallel() // Docker alone
	p, cli := dockerOnly(t)
	testutil.RequireImage(t, cli, testutil.StandinToolsImage)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	ctx := context.Background()
	holder := "sriov-lane-test-" + name + "-holder"
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), holder, container.RemoveOptions{Force: true})
		_ = cli.VolumeRemove(context.Background(), ImageVolumeName(name), true)
	})
	hold := func(t *testing.T) {
		t.Helper()
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: ImageVolumeName(name)}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerCreate(ctx, &container.Config{Image: testutil.StandinToolsImage},
			&container.HostConfig{Binds: []string{ImageVolumeName(name) + ":/images"}}, nil, nil, holder); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("released", func(t *testing.T) {
		hold(t)
		// The holder goes once Docker has refused the volume's removal:
		// Delete must then wait for its destroy, not fail.
		p, refused := answered(t, cli, http.MethodDelete, "/volumes/"+ImageVolumeName(name))
		deleted := make(chan error, 1)
		go func() { deleted <- p.Delete(ctx, name) }()
		select {
		case <-refused:
		case err := <-deleted:
			t.Fatalf("delete ended before it tried the volume: %v", err)
		}
		if err := cli.ContainerRemove(ctx, holder, container.RemoveOptions{Force: true}); err != nil {
			t.Fatalf("removing the holder: %v", err)
		}
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
		if _, err := cli.VolumeInspect(ctx, ImageVolumeName(name)); !cerrdefs.IsNotFound(err) {
			t.Errorf("volume %s left: %v", ImageVolumeName(name), err)
		}
	})
	// An up killed inside k3d's create can leave Docker finishing a node's
	// create after delete listed the lane's containers: on "in use", the
	// volume's removal asks for the lane's containers to be removed again.
	t.Run("held by a node that came late", func(t *testing.T) {
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: ImageVolumeName(name)}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerCreate(ctx, &container.Config{Image: testutil.StandinToolsImage, Labels: map[string]string{labelK3dCluster: name}},
			&container.HostConfig{Binds: []string{ImageVolumeName(name) + ":/images"}}, nil, nil, holder); err != nil {
			t.Fatal(err)
		}
		calls := 0
		err := p.removeVolume(ctx, ImageVolumeName(name), func() {
			calls++
			if _, errs := p.removeContainers(ctx, name, nil); len(errs) > 0 {
				t.Error(errs)
			}
		})
		if err != nil || calls != 1 {
			t.Errorf("removeVolume: %v after %d calls of inUse, want nil after 1", err, calls)
		}
		if _, err := cli.ContainerInspect(ctx, holder); !cerrdefs.IsNotFound(err) {
			t.Errorf("the lane's late node %s left: %v", holder, err)
		}
	})
	t.Run("held", func(t *testing.T) {
		hold(t)
		err := p.Delete(ctx, name)
		if err == nil || !strings.Contains(err.Error(), "removing volume "+ImageVolumeName(name)) || !strings.Contains(err.Error(), "in use") {
			t.Errorf("delete with the volume held: %v", err)
		}
	})
}

// An up SIGKILLed inside k3d's create can leave Docker finishing its network
// after the next up made one of the same name: Delete removes both, where
// removing by the shared name fails as ambiguous.
func TestRigDeleteRemovesTwoNetworksOfOneName(t *testing.T) {
	p, cli := rig(t)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	ctx := context.Background()
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			_ = cli.NetworkRemove(context.Background(), id)
		}
	})
	// The client asks the daemon to refuse a duplicate name (CheckDuplicate
	// below API 1.44), a check the daemon does not hold against a create
	// already under way; the raw API without it makes the second network.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", "/var/run/docker.sock")
	}}}
	for range 2 {
		resp, err := hc.Post("http://docker/v1.41/networks/create", "application/json",
			strings.NewReader(`{"Name":"`+NetworkName(name)+`","Driver":"bridge","CheckDuplicate":false,"Labels":{"app":"k3d"}}`))
		if err != nil {
			t.Fatal(err)
		}
		var created struct {
			ID string `json:"Id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&created)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated || created.ID == "" {
			t.Fatalf("creating network %s: %s, %v", NetworkName(name), resp.Status, err)
		}
		ids = append(ids, created.ID)
	}
	if err := cli.NetworkRemove(ctx, NetworkName(name)); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("removing by name with two networks of that name: %v, want Docker's ambiguous refusal (the case Delete must handle)", err)
	}
	if err := p.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := cli.NetworkInspect(ctx, id, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("network %.12s left: %v", id, err)
		}
	}
}

// A create that was interrupted (its journal entry has no done) can leave
// Docker finishing a request after down listed the lane's objects: the
// undoer follows Docker's events for the lane, so a network that Docker
// makes a second into the undo is removed too, however long Docker takes
// to make it within the product's bound (over 3 s beside make test's
// lanes, seen here).
func TestRigUndoInterruptedCreateRemovesLateNetwork(t *testing.T) {
	t.Parallel() // Docker alone, and mostly a wait on interruptedCreateBound
	_, cli := dockerOnly(t)
	// The undo's client tells when Docker has answered its list of
	// networks: a network made after that is one the undo could not see.
	p, looked := answered(t, cli, http.MethodGet, "/networks")
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	ctx := context.Background()
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), NetworkName(name)) })
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Begin(OpCluster, ClusterRecord{Name: name}); err != nil {
		t.Fatal(err)
	}
	undone := make(chan time.Time, 1)
	go func() {
		err := journal.Reverse(ctx, j, Undoers(p), journal.ReverseOptions{})
		if err != nil {
			t.Errorf("undo of an interrupted create: %v", err)
		}
		undone <- time.Now()
	}()
	select {
	case <-looked:
	case <-undone:
		t.Fatal("the undo ended before it listed networks")
	}
	_, err = cli.NetworkCreate(ctx, NetworkName(name), network.CreateOptions{Driver: "bridge", Labels: map[string]string{"app": "k3d"}})
	if err != nil {
		t.Fatalf("creating the late network: %v", err)
	}
	made := time.Now()
	ended := <-undone
	if ended.Before(made) {
		t.Fatalf("the undo ended %s before Docker made the network: the case went untested", made.Sub(ended).Round(time.Millisecond))
	}
	if _, err := cli.NetworkInspect(ctx, NetworkName(name), network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("network %s, made while the undo followed Docker's events, was left (inspect: %v)", NetworkName(name), err)
	}
}

// answered is a Provider on cli's daemon whose client closes the channel
// once Docker has answered the first request of method to a path ending in
// suffix: how a test knows the provider has looked, without a sleep.
func answered(t *testing.T, cli *client.Client, method, suffix string) (*Provider, <-chan struct{}) {
	t.Helper()
	seen := make(chan struct{})
	var once sync.Once
	base := cli.HTTPClient().Transport
	hooked, err := client.NewClientWithOpts(client.WithHost(cli.DaemonHost()), client.WithAPIVersionNegotiation(),
		client.WithHTTPClient(&http.Client{Transport: testutil.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(r)
			if r.Method == method && strings.HasSuffix(r.URL.Path, suffix) {
				once.Do(func() { close(seen) })
			}
			return resp, err
		})}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hooked.Close() })
	return NewWithClient(hooked), seen
}

// Delete waits out a container removal Docker already has under way (a
// down killed mid-delete) until Docker reports the container destroyed.
func TestRigWaitContainerGoneEndsOnDestroy(t *testing.T) {
	_, cli := rig(t)
	slot := testutil.TakeSlot(t)
	ctx := context.Background()
	name := slot.RigPrefix() + "-going"
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: testutil.StandinToolsImage}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	p, inspected := answered(t, cli, http.MethodGet, "/containers/"+c.ID+"/json")
	done := make(chan error, 1)
	go func() { done <- p.waitContainerGone(ctx, c.ID) }()
	select {
	case <-inspected:
	case err := <-done:
		t.Fatalf("waitContainerGone returned before it inspected the container: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("waitContainerGone returned while the container exists: %v", err)
	default:
	}
	if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("waitContainerGone after the container was removed: %v", err)
	}
}
