package lane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/reset"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// RepairOptions tune Repair.
type RepairOptions struct {
	// Engines are the command run's clients of the container engines.
	Engines *provider.Engines
	// Out takes the progress, the log and hooks' output: the command's
	// stderr (results are the caller's, for stdout).
	Out     io.Writer
	Verbose bool
}

// RepairReport says what Repair did.
type RepairReport struct {
	// Repaired are the agents whose PFs were put back.
	Repaired []string
	// ClusterRestored: the cluster had come back empty and up's objects
	// were applied again.
	ClusterRestored bool
}

// Repair brings a degraded lane back to what up left. An agent that
// restarted runs in a new netns while its PFs wait in the old, pinned one:
// for each such agent, repair undoes the agent's share of the journal (its
// VFs, the moves into the old netns, the pin), then does it again into the
// running container, as up did. A cluster that came back empty (its server
// restarted with the datastore on a tmpfs) gets up's own steps again, from
// preparing the nodes to the baseline. Every change is journalled as in
// up, so down works at any point of it, and a repair that fails half way
// can be run again.
func Repair(ctx context.Context, l *config.Lane, opts RepairOptions) (RepairReport, error) {
	var rep RepairReport
	if err := requireLane(l); err != nil {
		return rep, err
	}
	c, closeLane, err := openLane(l, opts.Engines, opts.Out, opts.Verbose, false)
	if err != nil {
		return rep, err
	}
	defer closeLane()
	if err := restartStaleAgents(ctx, c); err != nil {
		return rep, err
	}
	repaired, err := repairAgents(ctx, c)
	rep.Repaired = repaired
	if err != nil {
		return rep, err
	}
	// One set of clients for the rest of the run, as reset has
	// (restartStaleAgents made them when it could).
	if c.Kube == nil {
		if err := c.connect(); err != nil {
			return rep, fmt.Errorf("lane %s: %w", l.Name, err)
		}
	}
	var lost bool
	if _, err := c.run(ctx, stop, Step{Name: "check the cluster", Run: func(ctx context.Context, c *Session) (err error) {
		lost, err = clusterLost(ctx, c.Lane, c.Kube)
		return err
	}}); err != nil {
		return rep, err
	}
	if lost {
		rep.ClusterRestored = true
		return rep, restoreCluster(ctx, c)
	}
	if len(repaired) == 0 {
		c.Log.V(0).Infof("lane %s is healthy: nothing to repair", l.Name)
		return rep, nil
	}
	_, err = c.run(ctx, stop, restartDevicePluginsStep(c, repaired), waitVFsStep)
	return rep, err
}

// waitVFsStep waits, within up's wait bound, for every agent to offer the
// VFs the journal says it holds: up's wait narrowed to the VFs, for a
// cluster whose components kept running.
var waitVFsStep = Step{Name: waitStep.Name, Run: func(ctx context.Context, c *Session) error {
	wctx, cancel := context.WithTimeout(ctx, c.Lane.WaitTimeout.Duration)
	defer cancel()
	return waitVFs(wctx, c)
}}

// clusterLost says whether l's cluster came back empty: none of the
// namespaces up's baseline holds is left under its UID (reset.Lost).
// status and repair both ask it.
func clusterLost(ctx context.Context, l *config.Lane, kc *kube.Clients) (bool, error) {
	b, err := reset.Load(l.Name, l.Dir())
	if errors.Is(err, reset.ErrNoBaseline) {
		// A lane up did not take as far as its baseline, or one an older
		// sriov-lane brought up: nothing to tell an emptied cluster by,
		// and repair's checks of PFs and VFs still apply.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return reset.Lost(ctx, kc, b)
}

// restartStaleAgents restarts, on a cluster that came back empty, each
// agent that has no Node and started before the server last stopped: its
// kubelet registered with the server as it was, and a kubelet registers
// once, at its start (kubernetes pkg/kubelet/kubelet_node_status.go
// registerWithAPIServer@v1.36.3, registrationCompleted), so it would never
// register with the emptied one and repair would wait for it in vain. It
// runs before the PFs are put back, as a restart moves the agent into a
// new netns. A cluster repair cannot read yet is left to the steps after.
func restartStaleAgents(ctx context.Context, c *Session) error {
	if _, err := os.Stat(c.Lane.KubeconfigPath()); errors.Is(err, os.ErrNotExist) {
		// Up never got as far as the cluster: no agent registered anywhere.
		return nil
	}
	if err := c.connect(); err != nil {
		return fmt.Errorf("lane %s: %w", c.Lane.Name, err)
	}
	lost, err := clusterLost(ctx, c.Lane, c.Kube)
	if err != nil {
		// An API server that does not answer yet (its node is starting) is
		// not a reason to leave the PFs out: they are put back first, and
		// the cluster check after them reports what the API says then.
		c.Log.V(1).Infof("not looking for agents to restart: %v", err)
		return nil
	}
	if !lost {
		return nil
	}
	agents, err := c.Provider.AgentsStartedBeforeServerStopped(ctx, c.Lane.ClusterName())
	if err != nil {
		return err
	}
	var steps []Step
	for _, a := range agents {
		_, err := c.Kube.Typed.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			continue
		}
		steps = append(steps, Step{Name: "restart " + a.Name + ", registered with the server before it lost its datastore", Run: func(ctx context.Context, c *Session) error {
			return c.Provider.RestartAgent(ctx, a)
		}})
	}
	_, err = c.run(ctx, stop, steps...)
	return err
}

// restoreCluster runs up's cluster steps again on a cluster that came back
// empty: its PFs and VFs are already back (repairAgents). The post-up
// hooks are the user's: what they made is named as lost, not redone.
func restoreCluster(ctx context.Context, c *Session) error {
	c.Log.V(0).Infof("lane %s: %s; applying up's objects again", c.Lane.Name, clusterLostWords)
	if _, err := c.run(ctx, stopNamed, prepareNodesStep, waitRegisteredStep, labelNodesStep, deployComponentsStep, waitStep, recordBaselineStep); err != nil {
		return fmt.Errorf("repairing lane %s: %w", c.Lane.Name, err)
	}
	for _, h := range c.Lane.Hooks.PostUp {
		c.Log.V(0).Infof("lost with the cluster, not run again: what post-up hook %q made; run it yourself if the lane needs it", strings.Join(h, " "))
	}
	return nil
}

// waitRegisteredStep waits, within the lane's wait timeout, for every node
// of the cluster to have registered with the restarted server.
var waitRegisteredStep = Step{Name: "wait for nodes to register", Run: stepWaitRegistered}

func stepWaitRegistered(ctx context.Context, c *Session) error {
	names, err := c.nodeNames(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.Lane.WaitTimeout.Duration)
	defer cancel()
	return cni.WaitNodesRegistered(wctx, c.Kube.Typed, names)
}

// clusterLostWords say what a cluster that came back empty lost.
const clusterLostWords = "the cluster came back empty (its server restarted with the datastore on a tmpfs, server.datastoreOnTmpfs): " +
	"Multus, the CNI, the device plugin, the NADs, the node labels and what the post-up hooks made are gone"

// restartDevicePluginsStep restarts the device plugin on each of agents,
// repaired: one that started with the agent, before its VFs were back,
// advertises none of them (cni.RestartDevicePlugins). It returns once the
// new plugins run and the kubelets have had time to say so: until then a
// Node can still show the allocatable of before the restart while its
// kubelet admits nothing (cni.KubeletStatusSettle), and a wait for VFs
// would pass on it. c is connected.
func restartDevicePluginsStep(c *Session, agents []string) Step {
	what := "the device plugin"
	if c.Lane.VFAllocation == config.VFAllocationDRA {
		what = "the DRA driver"
	}
	return Step{
		Name: "restart " + what,
		If:   func(*Session) bool { return len(agents) > 0 },
		Run: func(ctx context.Context, c *Session) error {
			// The deletes and the wait share up's wait bound.
			wctx, cancel := context.WithTimeout(ctx, c.Lane.WaitTimeout.Duration)
			defer cancel()
			return cni.RestartDevicePlugins(wctx, c.Kube.Typed, c.Lane.VFAllocation, agents)
		},
	}
}

// repairAgents checks that every PF is in the agent up put it in, with its
// VFs as configured, and redoes up's share of each agent where not. It
// returns the agents it repaired; the wait for their VFs is the caller's
// (waitVFs). c is an opened lane (openLane).
func repairAgents(ctx context.Context, c *Session) ([]string, error) {
	var broken []brokenAgent
	if _, err := c.run(ctx, stop, Step{Name: "check PFs and VFs", Run: func(ctx context.Context, c *Session) (err error) {
		broken, err = brokenAgents(ctx, c)
		return err
	}}); err != nil || len(broken) == 0 {
		return nil, err
	}
	var repaired []string
	for _, b := range broken {
		pcis := map[string]bool{}
		for _, pf := range b.pfs {
			pcis[pf.PCI] = true
		}
		takeBack := Step{Name: "take back the PFs of " + b.agent.Name, Run: func(ctx context.Context, c *Session) error {
			return journal.Reverse(ctx, c.Journal, c.undoers, journal.ReverseOptions{
				Only:   func(e *journal.Entry) bool { return sriov.OfAgent(e, b.agent.Name, pcis) },
				Report: c.reportUndo,
			})
		}}
		// Up's own steps, narrowed to this agent and its PFs. A restarted
		// container has lost what preparing it did (its / shared).
		agent := []provider.Node{b.agent}
		prepare := Step{Name: "prepare " + b.agent.Name, Run: func(ctx context.Context, c *Session) error {
			return c.Provider.Prepare(ctx, b.agent)
		}}
		move := Step{Name: "move PFs into " + b.agent.Name, Run: func(ctx context.Context, c *Session) error {
			return movePFs(ctx, c, agent, b.pfs)
		}}
		vfs := Step{Name: vfsStep.Name, Run: func(ctx context.Context, c *Session) error {
			return configureVFs(ctx, c, agent)
		}}
		if _, err := c.run(ctx, stopNamed, takeBack, prepare, move, vfs); err != nil {
			return repaired, fmt.Errorf("repairing lane %s: %w", c.Lane.Name, err)
		}
		repaired = append(repaired, b.agent.Name)
	}
	return repaired, nil
}

type brokenAgent struct {
	agent provider.Node
	pfs   []sriov.PF
}

// brokenAgents finds the agents whose PFs are not in their current netns,
// or whose VFs are not as configured (readHealth). An agent that is not
// running, or gone, cannot be repaired: the error says what to do.
func brokenAgents(ctx context.Context, c *Session) ([]brokenAgent, error) {
	l := c.Lane
	agents, err := c.Provider.Agents(ctx, l.ClusterName())
	if err != nil {
		return nil, err
	}
	placements := c.placements()
	if len(placements) == 0 {
		return nil, fmt.Errorf("lane %s has no PFs in agents (up did not get that far): run 'sriov-lane down --name %s'", l.Name, l.Name)
	}
	var order []string
	byAgent := map[string][]pfHealth{}
	for _, h := range readHealth(ctx, l, c.Docker, c.SRIOV.Locate, agents, placements) {
		if h.Problem != "" && !h.Repairable {
			return nil, errors.New(h.String())
		}
		if _, seen := byAgent[h.Node]; !seen {
			order = append(order, h.Node)
		}
		byAgent[h.Node] = append(byAgent[h.Node], h)
	}
	var out []brokenAgent
	for _, name := range order {
		var b brokenAgent
		broken := false
		for _, h := range byAgent[name] {
			b.agent = *h.Agent
			b.pfs = append(b.pfs, h.PF)
			if h.Problem != "" {
				c.Log.V(1).Info(h.Problem)
				broken = true
			}
		}
		// The whole of the agent's share is redone, the PFs in place too.
		if broken {
			out = append(out, b)
		}
	}
	return out, nil
}
