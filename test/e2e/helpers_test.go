// Package e2e runs the sriov-lane binary end to end on the rig: real Docker,
// k3d, netlink and kube-apiserver; stand-in PFs, sysfs and node images.
package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/docexample"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// binary is the sriov-lane built once for the package (TestMain).
var binary string

// vfioHold is test/rig/cmd/vfio-hold, built static by TestMain, for holding
// a VF's VFIO device from inside a node.
var vfioHold string

// staticBinary is sriov-lane and sysfsShim test/rig/cmd/sysfs-shim, built
// static by TestMain, for running in a node (the fleet test's hosts).
var staticBinary, sysfsShim string

// logsRoot is where a failed test's lanes export their logs (exportLogs):
// $ARTIFACTS, where a CI system collects files, else a directory made
// under the caller's temp dir (not TestMain's TMPDIR, which is removed).
var logsRoot = sync.OnceValues(func() (string, error) {
	if a := os.Getenv("ARTIFACTS"); a != "" {
		return a, nil
	}
	return os.MkdirTemp(callerTmp, "sriov-lane-e2e-logs-")
})

// callerTmp is the temp dir the tests were started with.
var callerTmp = os.TempDir()

// Tests that bring a lane up run in parallel (t.Parallel, and make test's
// -parallel): each takes a test slot (testutil.TakeSlot) for its rig
// prefix, lane names and ports, unique among all tests running on the
// machine, and every check they make is scoped to those. Tests that look at host-wide
// state (sysctls, a snapshot of what bad input may touch) stay serial and
// run first.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sriov-lane-e2e-bin-")
	if err != nil {
		panic(err)
	}
	// The not-root case runs the binary as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "opening the binary's directory to nobody: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sriov-lane")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/sriov-lane/sriov-lane/cmd/sriov-lane").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building sriov-lane: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// What runs inside a node container: static.
	vfioHold = filepath.Join(dir, "vfio-hold")
	staticBinary = filepath.Join(dir, "static", "sriov-lane")
	sysfsShim = filepath.Join(dir, "sysfs-shim")
	for _, b := range []struct{ out, pkg string }{
		{vfioHold, "test/rig/cmd/vfio-hold"},
		{staticBinary, "cmd/sriov-lane"},
		{sysfsShim, "test/rig/cmd/sysfs-shim"},
	} {
		build := exec.Command("go", "build", "-o", b.out, "github.com/sriov-lane/sriov-lane/"+b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// Every binary the tests run, and their temp dirs, get TMPDIR in here:
	// an up killed on purpose cannot remove its private k3d temp dir, and
	// parallel tests cannot t.Setenv.
	tmp, err := os.MkdirTemp("", "sriov-lane-e2e-tmp-")
	if err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is the environment the binary runs with: no SRIOV_LANE_* from the
// caller leaks in, and not a terminal, so output is plain lines.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SRIOV_LANE_") || strings.HasPrefix(kv, "CLUSTER_NAME=") || strings.HasPrefix(kv, "HOST_PORT=") ||
			strings.HasPrefix(kv, "PF_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type result struct {
	code   int
	output string
}

func run(t *testing.T, extraEnv []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.CommandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env(extraEnv...)
	return runCmd(t, cmd, "sriov-lane "+strings.Join(args, " "))
}

// runCmd runs cmd, what the log calls it, with its output combined, and
// logs how it ended.
func runCmd(t *testing.T, cmd *exec.Cmd, what string) result {
	t.Helper()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	code := testutil.ExitCode(t, cmd.Run(), what)
	t.Logf("%s -> exit %d\n%s", what, code, buf.String())
	return result{code, buf.String()}
}

// lane is one lane config on a rig, written to a file of its own.
type lane struct {
	cfg  *config.Lane
	path string
	// exported is set once the lane's logs are exported for a failure.
	exported atomic.Bool
}

// newLane writes the config of lane i of slot s on rig r: the slot's i-th
// lane name and its next port as the API port (testutil.Slot), taking the
// PFs matching pfs when given.
func newLane(t *testing.T, r *rig.Rig, s *testutil.Slot, i int, pfs ...string) *lane {
	t.Helper()
	name, port := s.Lane(i), s.Port(t)
	b, err := os.ReadFile(r.LaneConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	l := &config.Lane{}
	if err := config.DecodeStrict(b, l); err != nil {
		t.Fatal(err)
	}
	l.Name, l.APIPort = name, port
	if len(pfs) > 0 {
		l.PFs.Include = pfs
		l.Agents = len(pfs)
		l.PFsPerNode = 1
	}
	out, err := config.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r.Dir, name+".yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	config.SetDefaults(l)
	ln := &lane{cfg: l, path: p}
	// Whatever happens to the test, the lane goes down before the rig does;
	// a lane that does not keeps the slot from the tests after this one.
	t.Cleanup(func() {
		if res := ln.down(t); res.code != 0 {
			s.Keep()
			t.Errorf("lane %s is not down: slot kept until this run ends, so no other test meets what it left", name)
		}
	})
	return ln
}

// rigLane is how most tests start: a test slot, a rig of pfs stand-in PFs
// (opts for its NIC) under the slot's prefix, and the config of the slot's
// first lane on it, which edit, when given, changes before it is written
// again. The caller has already called parallelOnRig (or requireRig, if
// it runs alone).
func rigLane(t *testing.T, pfs int, edit func(*config.Lane), opts ...rig.TestOption) (*testutil.Slot, *rig.Rig, *lane) {
	t.Helper()
	s := testutil.TakeSlot(t)
	r := rig.NewForTest(t, pfs, s.RigPrefix(), opts...)
	l := newLane(t, r, s, 0)
	if edit != nil {
		edit(l.cfg)
		writeLane(t, l)
	}
	return s, r, l
}

// up brings the lane up and fails the test if it does not come up.
func (l *lane) up(t *testing.T) {
	t.Helper()
	if res := l.upRetained(t, nil); res.code != 0 {
		t.Fatal("up failed")
	}
}

// upRetained runs an up the test expects to succeed, with --retain: if it
// fails, what it made stays for down to export (exportLogs) and then
// remove, instead of being undone before anyone could look at it. Ups
// whose failure and undo a test checks run without it.
func (l *lane) upRetained(t *testing.T, extraEnv []string, args ...string) result {
	t.Helper()
	return run(t, extraEnv, append([]string{"up", "--config", l.path, "--retain"}, args...)...)
}

// example runs the user docs' example e (docexample.Lookup) on the lane as
// the rig must: its sriov-lane words, the lane's name where the example
// names one (--name), then the lane's config and extra; its environment
// goes before the run's.
func (l *lane) example(t *testing.T, e docexample.Example, extra ...string) result {
	t.Helper()
	if len(e.Args) == 0 || filepath.Base(e.Args[0]) != "sriov-lane" {
		t.Fatalf("%s: not a sriov-lane command", e)
	}
	args := slices.Clone(e.Args[1:])
	for i := range args {
		if args[i] == "--name" && i+1 < len(args) {
			args[i+1] = l.cfg.Name
		}
	}
	return run(t, e.Env, append(append(args, "--config", l.path), extra...)...)
}

// down takes the lane down, after exporting its logs if the test failed.
func (l *lane) down(t *testing.T) result {
	if t.Failed() {
		l.exportLogs(t)
	}
	return run(t, nil, "down", "--config", l.path)
}

// exportLogs runs `sriov-lane export logs` into <logsRoot>/<test name>,
// once per lane, and says where: a failed e2e test leaves the lane's node,
// pod and component logs where CI collects them.
func (l *lane) exportLogs(t *testing.T) {
	if !l.exported.CompareAndSwap(false, true) {
		return
	}
	root, err := logsRoot()
	if err != nil {
		t.Logf("not exporting logs of lane %s: %v", l.cfg.Name, err)
		return
	}
	dir := filepath.Join(root, t.Name())
	if res := run(t, nil, "export", "logs", "--config", l.path, dir); res.code != 0 {
		// Diagnostics only: a lane that never came up has nothing to export.
		t.Logf("exporting logs of lane %s to %s: exit %d", l.cfg.Name, dir, res.code)
		return
	}
	t.Logf("logs of lane %s exported to %s", l.cfg.Name, filepath.Join(dir, l.cfg.Name))
}

// hostSnapshot is what must be unchanged by a command that failed early.
type hostSnapshot struct {
	links, containers, state []string
}

// snapshot is scoped to what this test's lane and rig could touch: other
// packages' tests create links and containers concurrently.
func snapshot(t *testing.T, r *rig.Rig, l *lane) hostSnapshot {
	t.Helper()
	stateDir := l.cfg.StateDir
	var s hostSnapshot
	links, err := nsutil.LinkList(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range links {
		if strings.HasPrefix(link.Attrs().Name, r.State.Prefix) {
			s.links = append(s.links, fmt.Sprintf("%s/%s", link.Attrs().Name, link.Attrs().HardwareAddr))
		}
	}
	cli := docker(t)
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		names := strings.Join(c.Names, ",")
		if strings.Contains(names, l.cfg.Name) || c.Labels["k3d.cluster"] == l.cfg.Name {
			s.containers = append(s.containers, names)
		}
	}
	// What cannot be read is left out, not a failure: a command under test
	// may be removing it. Walk then returns no error of its own.
	if err := filepath.Walk(stateDir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			s.state = append(s.state, p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(s.links)
	sort.Strings(s.containers)
	sort.Strings(s.state)
	return s
}

func (a hostSnapshot) diff(b hostSnapshot) string {
	d := ""
	for _, pair := range []struct {
		what string
		x, y []string
	}{{"links", a.links, b.links}, {"containers", a.containers, b.containers}, {"state files", a.state, b.state}} {
		if strings.Join(pair.x, "\n") != strings.Join(pair.y, "\n") {
			d += fmt.Sprintf("%s changed:\n before %v\n after  %v\n", pair.what, pair.x, pair.y)
		}
	}
	return d
}

func docker(t *testing.T) *client.Client {
	t.Helper()
	return testutil.RequireDockerClient(t)
}

// engineClient is a client of the engine lane l runs on. A Podman lane
// holds Docker's shared lock too (docker): its nodes pull from the rig
// registry, which runs in Docker.
func engineClient(t *testing.T, l *lane) *client.Client {
	t.Helper()
	cli := docker(t)
	if l.cfg.ContainerEngine == config.EnginePodman {
		podman := testutil.RequirePodmanClient(t)
		testutil.RequireImage(t, podman, testutil.StandinK3sImage)
		testutil.RequireImage(t, podman, testutil.StandinToolsImage)
		return podman
	}
	return cli
}

// assertLaneGone checks the lane left nothing: PFs home under their names
// with numvfs 0, no container, network, volume, lease or journal.
func assertLaneGone(t *testing.T, r *rig.Rig, l *lane, pfs []rig.PFInfo) {
	t.Helper()
	for _, pf := range pfs {
		link, err := netlink.LinkByName(pf.Name)
		if err != nil {
			t.Errorf("PF %s not back in the host netns: %v", pf.Name, err)
			continue
		}
		if !strings.EqualFold(link.Attrs().HardwareAddr.String(), pf.MAC) {
			t.Errorf("link %s has MAC %s, want %s", pf.Name, link.Attrs().HardwareAddr, pf.MAC)
		}
		n, err := os.ReadFile(filepath.Join(r.State.SysfsRoot, "bus/pci/devices", pf.BDF, "sriov_numvfs"))
		if err != nil || strings.TrimSpace(string(n)) != "0" {
			t.Errorf("PF %s numvfs = %q (%v), want 0", pf.Name, n, err)
		}
	}
	left, err := testutil.K3dLeftovers(context.Background(), engineClient(t, l), l.cfg.Name)
	if err != nil {
		t.Error(err)
	}
	for _, o := range left {
		t.Errorf("%s of lane %s remains", o, l.cfg.Name)
	}
	leases, _ := filepath.Glob(filepath.Join(statedir.Dir(l.cfg.StateDir).Leases(), "*.json"))
	for _, f := range leases {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), `"lane": "`+l.cfg.Name+`"`) {
			t.Errorf("lease %s of lane %s remains", f, l.cfg.Name)
		}
	}
	if _, err := os.Stat(l.cfg.Dir().Path()); !os.IsNotExist(err) {
		t.Errorf("lane dir of %s remains (%v)", l.cfg.Name, err)
	}
	// No netns pin (or any other mount) of the lane is left behind.
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), l.cfg.Dir().Path()+"/") {
		t.Errorf("a mount under the lane dir of %s remains", l.cfg.Name)
	}
}

// startUp starts `up` and returns a channel of its output lines.
func startUp(t *testing.T, l *lane) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(binary, "up", "--config", l.path)
	cmd.Env = env()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		if err := sc.Err(); err != nil {
			lines <- "startUp: " + err.Error()
		}
		close(lines)
	}()
	go func() {
		// How up ended reaches the caller as cmd.ProcessState; what else
		// Wait reports (copying the output failed) ends the lines.
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = nil
		}
		pw.CloseWithError(err)
	}()
	return cmd, lines
}

func statusJSON(t *testing.T, l *lane) map[string]any {
	t.Helper()
	r := run(t, nil, "status", "--config", l.path, "-o", "json")
	if r.code != 0 {
		t.Fatalf("status exit %d", r.code)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.output), &m); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.output)
	}
	return m
}

// copyFiles puts host files (values) at paths in the container (keys),
// mode 0755, with the directories they need, as one tar through the API.
func copyFiles(t *testing.T, cli *client.Client, name string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		var parents []string
		for d := filepath.Dir(dst); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(files[dst])
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cli.CopyToContainer(t.Context(), name, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("copying into %s: %v", name, err)
	}
}

// statusOnceServerAnswers runs `status -o json` until the lane's restarted
// server answers (a "ready" field), for at most 3 min, and returns the last:
// until then status cannot tell whether the cluster kept its objects.
func statusOnceServerAnswers(t *testing.T, l *lane) result {
	t.Helper()
	var res result
	_ = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, bound.Scaled(3*time.Minute), true, func(context.Context) (bool, error) {
		res = run(t, nil, "status", "--config", l.path, "-o", "json")
		return strings.Contains(res.output, `"ready": "`), nil
	})
	return res
}
