package lane

import (
	"context"
	"fmt"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// pfHealth is one of the lane's PFs as status shows it and repair mends
// it: where it is against where up put it, and its VFs against what up
// made. It is the one reading of a lane's health.
type pfHealth struct {
	sriov.Placement
	// Agent is the agent's container now; nil when it is gone.
	Agent *provider.Node
	// State is where the PF is ("up", "agent gone", "in old netns", ...)
	// and NameInNode its name there, as sriov.Locate tells.
	State, NameInNode string
	// Problem says what is wrong, "" when nothing is, and Do what to do
	// about it.
	Problem, Do string
	// Repairable: repair mends the problem by redoing up's share of the
	// agent. Otherwise repair cannot, and Do says what can.
	Repairable bool
}

// String is the problem with what to do, as status and repair say it.
func (h pfHealth) String() string {
	if h.Do == "" {
		return h.Problem
	}
	return h.Problem + ": " + h.Do
}

// locator finds a PF by its MAC from its agent's point of view
// (sriov.Locate).
type locator func(ctx context.Context, agent sriov.ContainerTarget, pin sriov.PinnedTarget, mac string) (sriov.Where, error)

// readHealth reads where each of the lane's PFs (placements, from the
// journal) is now, among the cluster's nodes as the engine lists them, and
// how their VFs differ from what up made.
func readHealth(ctx context.Context, l *config.Lane, cli *client.Client, locate locator, nodes []provider.Node, placements []sriov.Placement) []pfHealth {
	byName := map[string]*provider.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	sys := sriov.Sysfs{Root: l.SysfsRoot}
	repair := "run 'sriov-lane repair --name " + l.Name + "'"
	var out []pfHealth
	for _, pl := range placements {
		h := pfHealth{Placement: pl, Agent: byName[pl.Node]}
		out = append(out, h.read(ctx, l, cli, locate, sys, repair))
	}
	return out
}

func (h pfHealth) read(ctx context.Context, l *config.Lane, cli *client.Client, locate locator, sys sriov.Sysfs, repair string) pfHealth {
	if h.Agent == nil {
		h.State = "agent gone"
		h.Problem = fmt.Sprintf("%s: agent %s is gone (container removed); its PF waits in the pinned netns, and a lane cannot get the agent back", h.PF, h.Node)
		h.Do = fmt.Sprintf("run 'sriov-lane down --name %s', then up", l.Name)
		return h
	}
	w, err := locate(ctx, sriov.ContainerTarget{ID: h.Agent.ContainerID, Name: h.Agent.Name, Docker: cli},
		sriov.PinnedTarget{Path: l.Dir().Pin(h.Node), Name: h.Node}, h.PF.MAC)
	if err != nil {
		h.State = "unknown"
		h.Problem = fmt.Sprintf("%s: cannot tell where it is: %v", h.PF, err)
		return h
	}
	h.NameInNode, h.State = w.Name, w.State
	switch {
	case w.InAgent:
		// In place, but with VFs a job may have removed or rebound: the
		// same redo of the agent's share puts them back as up made them.
		if problem := vfProblem(l, sys, h.PF.PCI); problem != "" {
			h.Problem, h.Do, h.Repairable = fmt.Sprintf("%s in %s: %s", h.PF, h.Node, problem), repair, true
		}
	case w.AgentDown:
		h.State = "agent not running"
		h.Problem = fmt.Sprintf("%s: agent %s is not running", h.PF, h.Node)
		h.Do = fmt.Sprintf("start it (%s start %s), then %s", l.EngineCLI(), h.Node, repair)
	case w.InPin && w.AgentMoved:
		h.State = "in old netns"
		h.Problem = fmt.Sprintf("%s: agent %s restarted into a new network namespace and its PF stayed in the old (pinned) one", h.PF, h.Node)
		h.Do, h.Repairable = repair, true
	default:
		h.State = "missing"
		// After a host reboot the pin is gone and the PF is back in the
		// host's netns, where repair's undo finds it and moves it in again.
		h.Problem = fmt.Sprintf("%s: not in agent %s nor in its pinned netns (after a host reboot it is back in the host's)", h.PF, h.Node)
		h.Do, h.Repairable = repair+", or down (it finds PFs wherever they went)", true
	}
	return h
}
