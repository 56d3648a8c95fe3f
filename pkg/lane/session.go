package lane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/client"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Session is one command's hold on a lane (up, down, repair or reset): its
// config, its locked journal, the run's clients, and what up's steps found
// or made, each step reading what earlier ones left here.
type Session struct {
	Lane     *config.Lane
	Journal  *journal.Journal
	Log      *log.Printer
	Docker   *client.Client
	Provider Cluster
	SRIOV    NICs
	// engines are the command run's clients of the container engines; Docker
	// is the one of the lane's.
	engines *provider.Engines
	// undoers reverse what the lane journals: up's rollback, down, and
	// repair's undo of one agent's share.
	undoers journal.Undoers
	// Out receives hook output, beside Log's lines: the command's stderr.
	Out io.Writer
	// KubevirtciDir, when set, receives kubevirtci's provider files.
	KubevirtciDir string
	// Retain keeps what a failed up made (--retain), down to what a failed
	// k3d create leaves.
	Retain bool

	// Filled in by the steps.
	Leased     []sriov.PF
	Agents     []provider.Node
	Kubeconfig string
	// Kube are the run's clients of the lane's cluster, made once its
	// kubeconfig is written (up) or from it (reset): connect.
	Kube *kube.Clients
	// kubeFor makes them from a kubeconfig: kube.Connect, or a test's
	// fake clients.
	kubeFor func(kubeconfig string) (*kube.Clients, error)
	objects []*unstructured.Unstructured
}

// Cluster is what the lane's commands ask of the cluster's provider:
// pkg/provider's, on the k3d library, or a test's fake.
type Cluster interface {
	// RefuseExisting fails with provider.ErrExists when a cluster or
	// registry of the name is there already.
	RefuseExisting(ctx context.Context, cluster string, registry bool) error
	Create(ctx context.Context, l *config.Lane, opts provider.CreateOptions) error
	WriteKubeconfig(ctx context.Context, cluster, dest string) error
	CopyKubectl(ctx context.Context, cluster, dest string) error
	Nodes(ctx context.Context, cluster string) ([]provider.Node, error)
	Agents(ctx context.Context, cluster string) ([]provider.Node, error)
	// PrepareAll and Prepare make the nodes what the lane needs (their /
	// shared); a restarted container has lost it.
	PrepareAll(ctx context.Context, cluster string) error
	Prepare(ctx context.Context, n provider.Node) error
	StopAgents(ctx context.Context, cluster string) error
	RestartAgent(ctx context.Context, a provider.Node) error
	AgentsStartedBeforeServerStopped(ctx context.Context, cluster string) ([]provider.Node, error)
}

var _ Cluster = (*provider.Provider)(nil)

// NICs is what the lane's commands do to SR-IOV NICs, each change
// journalled in the lane's journal: pkg/sriov's, or a test's fake.
type NICs interface {
	// Discover lists this host's PFs.
	Discover() ([]sriov.PF, error)
	// Lease takes req.Count of req.Candidates for the lane, host-wide.
	Lease(ctx context.Context, req sriov.Request) ([]sriov.PF, error)
	PinNetns(ctx context.Context, c sriov.ContainerTarget, path string) (sriov.PinnedTarget, error)
	MovePF(ctx context.Context, pf sriov.PF, t sriov.NetnsTarget) (string, error)
	ConfigureVFs(ctx context.Context, pf sriov.PF, opts sriov.VFOptions) ([]sriov.VF, error)
	// Locate finds a PF by its MAC from its agent's point of view.
	Locate(ctx context.Context, agent sriov.ContainerTarget, pin sriov.PinnedTarget, mac string) (sriov.Where, error)
}

// hostNICs are this host's NICs, through pkg/sriov.
type hostNICs struct {
	*sriov.Session
	leaser *sriov.Leaser
}

func (h hostNICs) Discover() ([]sriov.PF, error) { return sriov.Discover(h.Sysfs) }

func (h hostNICs) Lease(ctx context.Context, req sriov.Request) ([]sriov.PF, error) {
	return h.leaser.Allocate(ctx, h.Session, req)
}

func (hostNICs) Locate(ctx context.Context, agent sriov.ContainerTarget, pin sriov.PinnedTarget, mac string) (sriov.Where, error) {
	return sriov.Locate(ctx, agent, pin, mac)
}

// startSRIOV opens the lane's use of pkg/sriov: its changes go into the
// session's journal, its notes to the progress printer.
func (c *Session) startSRIOV() {
	c.SRIOV = hostNICs{
		Session: &sriov.Session{Journal: c.Journal, Sysfs: sriov.Sysfs{Root: c.Lane.SysfsRoot}, Docker: c.Docker, Log: c.Log},
		leaser:  sriov.NewLeaser(c.Lane.StateDir),
	}
}

// finish removes the lane's journal and directory once nothing is pending.
func (c *Session) finish() {
	if err := c.Journal.Remove(); err == nil {
		removeLaneDir(c.Lane)
	}
}

// requireLane refuses a lane this host has no journal of: it was never
// up here, or down finished it. One wording for every command that needs
// a lane to act on.
func requireLane(l *config.Lane) error {
	if l.Dir().HasJournal() {
		return nil
	}
	return fmt.Errorf("lane %s does not exist (no journal %s; `sriov-lane up --name %s` brings it up)", l.Name, l.Dir().Journal(), l.Name)
}

// openLane locks an existing lane's journal and takes the command run's
// client of the lane's engine: what down, repair and reset start from.
// force lets the undo return PFs to the current netns even if they were
// taken from another (down --force). The returned func releases the lock.
func openLane(l *config.Lane, engines *provider.Engines, out io.Writer, verbose, force bool) (*Session, func(), error) {
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		if errors.Is(err, journal.ErrBusy) {
			return nil, nil, fmt.Errorf("lane %s: %w (is another sriov-lane up, down or repair running on it? an up stopped with Ctrl-C undoes itself)", l.Name, err)
		}
		return nil, nil, err
	}
	cli, err := engines.Client(l.ContainerEngine)
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	p := provider.NewWithClient(cli)
	c := &Session{Lane: l, Journal: j, Log: log.NewPrinter(out, verbose), Docker: cli, Provider: p, engines: engines,
		undoers: undoers(l, cli, p, force), kubeFor: kube.Connect, Out: out}
	c.startSRIOV()
	return c, func() { j.Close() }, nil
}

// connect makes the run's clients of the lane's cluster from its
// kubeconfig: up's steps once the cluster exists, and commands acting on a
// running lane (reset).
func (c *Session) connect() error {
	if c.Kubeconfig == "" {
		c.Kubeconfig = c.Lane.KubeconfigPath()
	}
	var err error
	c.Kube, err = c.kubeFor(c.Kubeconfig)
	return err
}

// removeLaneDir deletes the lane's directory once its journal is empty:
// what is left there (saved config, kubeconfig, machine-ids, a temp file a
// kill left behind) belongs to the lane alone.
func removeLaneDir(l *config.Lane) {
	os.RemoveAll(l.Dir().Path())
}
