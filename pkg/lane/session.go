package lane

import (
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/client"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Session is one command's hold on a lane (up, down, repair or reset): its
// config, its locked journal, the run's clients, and what up's steps found
// or made, each step reading what earlier ones left here.
type Session struct {
	Lane     *config.Lane
	Journal  *journal.Journal
	Progress *Progress
	Docker   *client.Client
	Provider *provider.Provider
	SRIOV    *sriov.Session
	// Out receives hook output.
	Out io.Writer
	// KubevirtciDir, when set, receives kubevirtci's provider files.
	KubevirtciDir string
	// Retain keeps what a failed up made (--retain), down to what a failed
	// k3d create leaves.
	Retain bool

	// Filled in by the steps.
	Leased     []sriov.PF
	Agents     []provider.Node
	Pins       map[string]sriov.PinnedTarget // by agent name
	Kubeconfig string
	// Kube are the run's clients of the lane's cluster, made once its
	// kubeconfig is written (up) or from it (reset): connect.
	Kube    *kube.Clients
	objects []*unstructured.Unstructured
}

// Undoers reverses everything the lane journals.
func (c *Session) Undoers() journal.Undoers {
	return undoers(c.Lane, c.Docker, c.Provider, false)
}

// undoers reverses everything the lane journals; force lets PFs return to
// the current netns even if they were taken from another.
func undoers(l *config.Lane, cli *client.Client, p *provider.Provider, force bool) journal.Undoers {
	return sriov.Undoers(sriov.Restorer{Sysfs: sriov.Sysfs{Root: l.SysfsRoot}, Docker: cli, Force: force, VFIODir: l.VFIODir}).
		Merge(provider.Undoers(p), laneUndoers())
}

// startSRIOV opens the lane's use of pkg/sriov: its changes go into the
// session's journal, its notes to the progress printer.
func (c *Session) startSRIOV() {
	c.SRIOV = &sriov.Session{Journal: c.Journal, Sysfs: sriov.Sysfs{Root: c.Lane.SysfsRoot}, Docker: c.Docker,
		Log: func(m string) { c.Progress.Infof("%s", m) }}
}

// finish removes the lane's journal and directory once nothing is pending.
func (c *Session) finish() {
	if err := c.Journal.Remove(); err == nil {
		removeLaneDir(c.Lane)
	}
}

// openLane locks an existing lane's journal and takes the command run's
// Docker client (cli; nil: one of its own): what down, repair and reset
// start from. The returned func releases both.
func openLane(l *config.Lane, cli *client.Client, out io.Writer, verbose bool) (*Session, func(), error) {
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		if errors.Is(err, journal.ErrBusy) {
			return nil, nil, fmt.Errorf("lane %s: %w (is another sriov-lane up, down or repair running on it? an up stopped with Ctrl-C undoes itself)", l.Name, err)
		}
		return nil, nil, err
	}
	cli, release, err := dockerFor(cli)
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	c := &Session{Lane: l, Journal: j, Progress: NewProgress(out, verbose), Docker: cli, Provider: provider.NewWithClient(cli), Out: out}
	return c, func() { release(); j.Close() }, nil
}

// dockerFor returns the command run's Docker client cli or, when a caller
// has none to give (nil), one of its own; release closes only the latter.
func dockerFor(cli *client.Client) (_ *client.Client, release func(), err error) {
	if cli != nil {
		return cli, func() {}, nil
	}
	if cli, err = provider.Connect(); err != nil {
		return nil, nil, err
	}
	return cli, func() { cli.Close() }, nil
}
