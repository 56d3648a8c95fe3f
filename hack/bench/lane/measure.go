package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	k3dclient "github.com/k3d-io/k3d/v5/pkg/client"
	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// sample is one iteration's figures.
type sample struct {
	clusterRun, clusterDelete time.Duration
	up, down                  time.Duration
	// upOnDisk is up of the same lane with server.datastoreOnTmpfs false
	// (up above has it true), for the figure of what the datastore on tmpfs saves.
	upOnDisk time.Duration
	// reset is reset of the lane after a job's namespace, ConfigMap and
	// ClusterRole (target: under 10% of up).
	reset time.Duration
	steps []lane.StepTiming
	// pfBack is the slowest PF's return in this down.
	pfBack time.Duration
	pfs    int
}

func (s sample) step(name string) time.Duration {
	for _, t := range s.steps {
		if t.Name == name {
			return t.Duration
		}
	}
	return 0
}

// Overhead is what the lane adds beyond creating the cluster and waiting
// for the components: what the lane's own steps cost.
func (s sample) overhead() time.Duration {
	return s.up - s.step(stepCreate) - s.step(stepWait)
}

const (
	stepCreate = "create cluster"
	stepWait   = "wait for VFs"
)

// measure alternates baseline and lane iterations so drift on the shared
// machine hits both alike.
func (b *bench) measure(ctx context.Context) (results, error) {
	var res results
	for i := range b.o.iters {
		var s sample
		var err error
		if s.clusterRun, s.clusterDelete, err = b.clusterRunOnce(ctx); err != nil {
			return res, fmt.Errorf("iteration %d, k3d ClusterRun: %w", i+1, err)
		}
		if err := b.laneOnce(ctx, &s); err != nil {
			return res, fmt.Errorf("iteration %d, lane: %w", i+1, err)
		}
		var disk sample
		if err := b.laneOnceWith(ctx, b.laneOnDisk, &disk); err != nil {
			return res, fmt.Errorf("iteration %d, lane with the datastore on disk: %w", i+1, err)
		}
		s.upOnDisk = disk.up
		fmt.Fprintf(os.Stderr, "  #%d ClusterRun %s, up %s (create %s, wait %s, overhead %s), reset %s, down %s, PF back %s, up with datastore on disk %s\n",
			i+1, sec(s.clusterRun), sec(s.up), sec(s.step(stepCreate)), sec(s.step(stepWait)), sec(s.overhead()),
			sec(s.reset), sec(s.down), msec(s.pfBack), sec(s.upOnDisk))
		res.samples = append(res.samples, s)
	}
	return res, nil
}

// clusterRunOnce creates the lane's cluster shape with k3d alone (the same
// simple config the provider builds, the same machine-id files and tools
// image) and deletes it. Only ClusterRun and ClusterDelete are timed.
func (b *bench) clusterRunOnce(ctx context.Context) (run, del time.Duration, err error) {
	l := b.baseline
	if err := writeMachineIDs(l); err != nil {
		return 0, 0, err
	}
	sc, err := provider.ClusterConfig(l, provider.StatHost(l))
	if err != nil {
		return 0, 0, err
	}
	if l.ToolsImage != "" {
		// k3d reads its tools image from the environment only.
		os.Setenv("K3D_IMAGE_TOOLS", l.ToolsImage)
	}
	cc, err := k3dconfig.TransformSimpleToClusterConfig(ctx, runtimes.Docker, *sc, "")
	if err != nil {
		return 0, 0, fmt.Errorf("translating for k3d: %w", err)
	}
	if cc, err = k3dconfig.ProcessClusterConfig(*cc); err != nil {
		return 0, 0, fmt.Errorf("processing k3d config: %w", err)
	}
	start := time.Now()
	if err := k3dclient.ClusterRun(ctx, runtimes.Docker, cc); err != nil {
		return 0, 0, err
	}
	run = time.Since(start)
	start = time.Now()
	// Its own context: an interrupt must not leave the cluster half deleted.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := k3dclient.ClusterDelete(dctx, runtimes.Docker, &k3d.Cluster{Name: l.Name}, k3d.ClusterDeleteOpts{SkipRegistryCheck: true}); err != nil {
		return 0, 0, fmt.Errorf("k3d ClusterDelete: %w", err)
	}
	del = time.Since(start)
	// Docker made the datastore volume ClusterConfig mounts, unlabelled
	// (the provider makes it labelled, before ClusterRun): not k3d's to
	// delete, so the bench's.
	if err := b.docker.VolumeRemove(dctx, provider.DatastoreVolumeName(l.ClusterName()), true); err != nil && !cerrdefs.IsNotFound(err) {
		return 0, 0, fmt.Errorf("removing the baseline's datastore volume: %w", err)
	}
	return run, del, ctx.Err()
}

// writeMachineIDs gives each node the /etc/machine-id file ClusterConfig
// mounts, as the provider's Create does.
func writeMachineIDs(l *config.Lane) error {
	nodes := []string{provider.NodeName(l.ClusterName(), provider.RoleServer, 0)}
	for i := range l.Agents {
		nodes = append(nodes, provider.NodeName(l.ClusterName(), provider.RoleAgent, i))
	}
	for _, n := range nodes {
		p := l.Dir().MachineID(n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		id := make([]byte, 16)
		rand.Read(id)
		if err := os.WriteFile(p, []byte(hex.EncodeToString(id)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// laneOnce runs up, a job's worth of objects and reset, and down,
// in-process (what the CLI's commands call), and checks that every PF is
// back on the host under its name.
func (b *bench) laneOnce(ctx context.Context, s *sample) error {
	return b.laneOnceWith(ctx, b.lane, s, b.resetOnce)
}

// laneOnceWith is up and down of lane l (the bench's lane or a variant of
// it under the same name, rig and port), with between, when set, run on
// the lane while it is up.
func (b *bench) laneOnceWith(ctx context.Context, l *config.Lane, s *sample, between ...func(context.Context, *config.Lane, *sample, io.Writer) error) error {
	var out bytes.Buffer
	w := io.Writer(&out)
	if b.o.verbose {
		w = io.MultiWriter(&out, os.Stderr)
	}
	start := time.Now()
	steps, err := lane.Up(ctx, l, lane.UpOptions{Engines: &b.engines, Out: w, Verbose: true})
	s.up = time.Since(start)
	if err != nil {
		return fmt.Errorf("up: %w\n%s", err, indent(out.String()))
	}
	s.steps = steps
	// The overhead is defined by these two steps: a renamed step must
	// fail the bench, not silently count as zero.
	for _, name := range []string{stepCreate, stepWait} {
		if s.step(name) == 0 {
			return fmt.Errorf("up reported no step %q (steps %v): update the bench", name, steps)
		}
	}
	for _, f := range between {
		out.Reset()
		if err := f(ctx, l, s, w); err != nil {
			// Down still runs: the PFs must come back.
			if _, derr := lane.Down(context.WithoutCancel(ctx), l, lane.DownOptions{Engines: &b.engines, Out: w, Verbose: true}); derr != nil {
				return errors.Join(err, fmt.Errorf("down: %w", derr))
			}
			return fmt.Errorf("%w\n%s", err, indent(out.String()))
		}
	}
	out.Reset()
	start = time.Now()
	rep, err := lane.Down(ctx, l, lane.DownOptions{Engines: &b.engines, Out: w, Verbose: true})
	s.down = time.Since(start)
	if err != nil {
		return fmt.Errorf("down: %w\n%s", err, indent(out.String()))
	}
	s.pfs = len(rep.PFReturn)
	for _, d := range rep.PFReturn {
		s.pfBack = max(s.pfBack, d)
	}
	if want := l.Agents * l.PFsPerNode; s.pfs != want {
		return fmt.Errorf("down returned %d PFs, the lane had %d", s.pfs, want)
	}
	var errs []error
	for _, pf := range b.state.PFs {
		link, err := netlink.LinkByName(pf.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("PF %s not back on the host: %w", pf.Name, err))
		} else if !strings.EqualFold(link.Attrs().HardwareAddr.String(), pf.MAC) {
			errs = append(errs, fmt.Errorf("link %s has MAC %s, want %s", pf.Name, link.Attrs().HardwareAddr, pf.MAC))
		}
	}
	return errors.Join(errs...)
}

// resetOnce does what a CI job does to the lane (a namespace with a
// ConfigMap, a ClusterRole), then times reset, which must take them away.
func (b *bench) resetOnce(ctx context.Context, l *config.Lane, s *sample, w io.Writer) error {
	kc, err := kube.Connect(l.KubeconfigPath())
	if err != nil {
		return err
	}
	cs := kc.Typed
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-job"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("making a job's namespace: %w", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("bench-job").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("making a job's ConfigMap: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-job"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("making a job's ClusterRole: %w", err)
	}
	start := time.Now()
	rep, err := lane.Reset(ctx, l, lane.ResetOptions{Engines: &b.engines, Out: w, Verbose: true})
	s.reset = time.Since(start)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if len(rep.Namespaces) != 1 || len(rep.Objects) != 1 {
		return fmt.Errorf("reset deleted namespaces %v and objects %v, want the job's one of each", rep.Namespaces, rep.Objects)
	}
	return nil
}

func logOut(verbose bool) io.Writer {
	if verbose {
		return os.Stderr
	}
	return io.Discard
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
