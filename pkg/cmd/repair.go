package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newRepairCmd(g *globals) *cobra.Command {
	var all bool
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "repair",
		Short: "Put a degraded lane's PFs back into their agents and wait for allocatable",
		Long: `repair fixes what status reports as degraded: an agent that restarted runs in a new
network namespace while its PFs wait in the old one, which the lane pinned. For each
such agent it takes the PFs back (VFs removed, PF home), then moves them into the
running agent and recreates and binds the VFs as up did, restarts the device plugin on
that agent (it finds its devices only when it starts), and waits until every agent
advertises its VFs again. A PF in place whose VFs are not as configured (removed, or
rebound to another driver) gets the same treatment. A cluster that came back empty (its
server restarted, after a Docker restart say, with the datastore on a tmpfs, the default)
gets up's own steps again: nodes prepared and labelled, every component and NAD applied,
the wait, a new baseline for reset; what post-up hooks made is named as lost, not redone.
It is journalled like up: down works at any point, and a repair that failed can be run again. An agent that is stopped must be started first;
one that was removed cannot be repaired (run down, then up).`,
		Example: `  sriov-lane status --name sriov || sriov-lane repair --name sriov
  sriov-lane repair --config lane.yaml -v
  sriov-lane repair --all`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return lf.eachLane(all, "not repaired", func(l *config.Lane) error {
				rep, err := lane.Repair(c.Context(), l, lane.RepairOptions{Engines: &g.engines, Out: g.streams.Err, Verbose: g.verbose})
				if err == nil && (len(rep.Repaired) > 0 || rep.ClusterRestored) {
					what := rep.Repaired
					if rep.ClusterRestored {
						what = append(what, "the cluster's objects")
					}
					fmt.Fprintf(g.streams.Out, "lane %s repaired (%s)\n", l.Name, strings.Join(what, ", "))
				}
				return err
			})
		},
	}
	lf = addLaneFlags(g, c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().BoolVar(&all, "all", false, "repair every lane of this host (this state dir)")
	return c
}
