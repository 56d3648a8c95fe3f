package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	k3dclient "github.com/k3d-io/k3d/v5/pkg/client"
	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// CreateOptions tune Create.
type CreateOptions struct {
	// Log shows what about this host makes the cluster differ from the
	// default (HostFacts.Notes) as warnings, for the user to see, and each
	// node's progress ("<container>: running", "registry: ready") at V(1);
	// nil discards.
	Log log.Logger
}

// envToolsImage is how k3d learns its tools image: it reads only this
// environment variable (no API field), so Create sets it for the process.
const envToolsImage = "K3D_IMAGE_TOOLS"

// StatHost gathers the HostFacts for l from this host. A cgroup mode it
// cannot detect stays CgroupUnknown: kubelet then decides for itself, and
// `check` reports why detection failed.
func StatHost(l *config.Lane) HostFacts {
	cg, _ := DetectCgroup(HostCgroupRoot)
	return HostFacts{VFIODir: isDir(l.VFIODir), LibModules: isDir(libModules), Cgroup: cg}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// ErrExists is returned by Create when the lane's cluster or registry is
// already there; Create never touches them then.
var ErrExists = errors.New("already exists")

// Create makes the lane's cluster and registry and waits, within
// l.WaitTimeout, until every node reports ready and the registry answers.
// On failure it leaves what it made (containers, network, volumes,
// registry, machine-id files) to the one owner of cleaning up, the undo of
// the lane's journal entry for the cluster (Undoers), and the error names
// the failing node and quotes the end of its log.
func (p *Provider) Create(ctx context.Context, l *config.Lane, opts CreateOptions) (err error) {
	lg := opts.Log
	if lg == nil {
		lg = log.Noop
	}
	name := l.ClusterName()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, l.WaitTimeout.Duration)
	defer cancel()

	host := StatHost(l)
	sc, err := ClusterConfig(l, host)
	if err != nil {
		return err
	}
	if err := p.RefuseExisting(ctx, name, l.RegistryEnabled()); err != nil {
		return err
	}
	for _, n := range host.Notes() {
		lg.Warn(n)
	}
	if l.ToolsImage != "" {
		if err := os.Setenv(envToolsImage, l.ToolsImage); err != nil {
			return fmt.Errorf("setting %s: %w", envToolsImage, err)
		}
	}
	defer sweepK3dTempFiles()()

	if err := writeMachineIDs(l); err != nil {
		return err
	}
	if err := writeNodeHooks(l); err != nil {
		return err
	}
	// Before k3d's transform: its validation creates a plain volume for a
	// k3d- named volume that does not exist yet.
	if err := p.createIPv6Network(ctx, l); err != nil {
		return err
	}
	if err := p.createDatastoreVolume(ctx, l); err != nil {
		return err
	}
	cc, err := k3dconfig.TransformSimpleToClusterConfig(ctx, runtimes.Docker, *sc, "")
	if err != nil {
		return fmt.Errorf("translating lane %s for k3d: %w", name, err)
	}
	if cc, err = k3dconfig.ProcessClusterConfig(*cc); err != nil {
		return fmt.Errorf("processing k3d config of %s: %w", name, err)
	}
	if err := k3dconfig.ValidateClusterConfig(ctx, runtimes.Docker, *cc); err != nil {
		return fmt.Errorf("k3d config of %s: %w", name, err)
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		p.watchNodes(watchCtx, name, lg)
	}()
	runErr := k3dclient.ClusterRun(ctx, runtimes.Docker, cc)
	stopWatch()
	<-watched
	if runErr != nil {
		return p.explainFailure(ctx, l, fmt.Errorf("creating cluster %s: %w", name, overran(parent, ctx, l.WaitTimeout.Duration, runErr)))
	}
	for _, n := range cc.Nodes {
		if n.Role == k3d.ServerRole || n.Role == k3d.AgentRole {
			nodeProgress(lg, n.Name, "ready")
		}
	}

	if l.RegistryEnabled() {
		nodeProgress(lg, RegistryAlias, "starting on "+l.Registry.Address)
		if err := p.createRegistry(ctx, l); err != nil {
			return fmt.Errorf("creating lane %s: %w", name, err)
		}
		nodeProgress(lg, RegistryAlias, "ready")
	}
	return nil
}

// overran names the bound a create ran out of. k3d reports it as whatever
// Docker call the deadline cut short ("Failed to copy content to
// container ...: context deadline exceeded"), which says nothing of
// waitTimeout, the setting to raise on a slow or loaded host. An
// interrupted create (parent done) is left as it is.
func overran(parent, ctx context.Context, bound time.Duration, err error) error {
	if parent.Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("not created within waitTimeout %s (--wait-timeout; a loaded host may need longer): %w", bound, err)
}

// RefuseExisting is the one answer to "does the lane's cluster exist": it
// fails, wrapping ErrExists, when a node container of the cluster is there,
// or (registry) the lane registry's container. check reports it, up asks it
// before it journals the cluster (an undo must never delete a cluster that
// is not the lane's), and Create before it makes anything, so a failed
// Create never deletes what was there before it.
func (p *Provider) RefuseExisting(ctx context.Context, cluster string, registry bool) error {
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return err
	}
	if len(nodes) > 0 {
		return fmt.Errorf("k3d cluster %s %w (%d nodes: %s, ...)", cluster, ErrExists, len(nodes), nodes[0].Name)
	}
	if registry {
		if _, err := p.docker.ContainerInspect(ctx, RegistryName(cluster)); err == nil {
			return fmt.Errorf("registry container %s %w", RegistryName(cluster), ErrExists)
		}
	}
	return nil
}

// k3dHostsFileSettle is how old a k3d-hostsfile-* must be before it is
// removed: k3d reads its file back a second after writing it.
const k3dHostsFileSettle = 3 * time.Second

// sweepK3dTempFiles works around k3d v5.9.0 leaving one k3d-hostsfile-* in
// the temp dir per node per create (pkg/client/hooks.go never removes it):
// it notes what is there now and returns a func that removes the new ones
// once they are settled.
func sweepK3dTempFiles() func() {
	pattern := filepath.Join(os.TempDir(), "k3d-hostsfile-*")
	before := map[string]bool{}
	if m, err := filepath.Glob(pattern); err == nil {
		for _, f := range m {
			before[f] = true
		}
	}
	return func() {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			// Another process's create may be between writing its file and
			// reading it back (k3d sleeps 1 s there): leave fresh files.
			if fi, err := os.Stat(f); err == nil && !before[f] && time.Since(fi.ModTime()) > k3dHostsFileSettle {
				os.Remove(f)
			}
		}
	}
}
