package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newDownCmd(g *globals) *cobra.Command {
	var all, force bool
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "down",
		Short: "Tear a lane down: PFs back first, then cluster, registry and leases",
		Long: `down works from the lane's journal, whatever state the lane is in (half created,
containers removed by hand, Docker restarted, up killed): every PF goes back to the
network namespace it was found in, under its original name, with numvfs 0; then the
cluster and registry are deleted and the leases released. It exits 0 when there is
nothing to do.`,
		Example: `  sriov-lane down
  sriov-lane down --name lane2
  sriov-lane down --all
  sriov-lane down --config lane.yaml --force`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return lf.eachLane(all, "not fully down", func(l *config.Lane) error {
				rep, err := lane.Down(c.Context(), l, lane.DownOptions{Engines: &g.engines, Out: g.streams.Err, Verbose: g.verbose, Force: force})
				switch {
				case err != nil:
					return err
				case rep.NothingToDo:
					fmt.Fprintf(g.streams.Out, "lane %s: nothing to do\n", l.Name)
				default:
					fmt.Fprintf(g.streams.Out, "lane %s is down\n", l.Name)
				}
				return nil
			})
		},
	}
	lf = addLaneFlags(g, c, false)
	// down needs the state dir (and sysfs root for lanes from older state).
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().BoolVar(&all, "all", false, "tear down every lane of this host (this state dir)")
	c.Flags().BoolVar(&force, "force", false, "continue past failed undos; return PFs to the current netns even if they came from another")
	return c
}
