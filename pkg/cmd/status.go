package cmd

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

func newStatusCmd(g *globals) *cobra.Command {
	var output string
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "Show lanes, or one lane's health, nodes, PFs, VFs and allocatable",
		Long: `status lists the lanes of this host, or shows one lane: its health, nodes, where each
PF is, its VFs and their drivers, allocatable and lease owner. A lane whose PF is not
in the agent up put it in (the agent restarted, stopped or was removed), or whose PF has
other VFs than vfsPerPF or VFs on another driver than vfDriver, is degraded: status says
what to do and exits 1.`,
		Example: `  sriov-lane status                  # every lane of this host
  sriov-lane status --name sriov
  sriov-lane status --name sriov -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lf.load()
			if err != nil {
				return err
			}
			if lf.name == "" && lf.file == "" {
				names, err := statedir.Dir(l.StateDir).Lanes()
				if err != nil {
					return err
				}
				if output == "json" {
					b, _ := json.MarshalIndent(names, "", "  ")
					fmt.Fprintln(g.streams.Out, string(b))
					return nil
				}
				if len(names) == 0 {
					fmt.Fprintln(g.streams.Out, "no lanes under "+l.StateDir)
				}
				for _, n := range names {
					fmt.Fprintln(g.streams.Out, n)
				}
				return nil
			}
			saved, err := lane.ResolveSaved(l, g.log())
			if err != nil {
				return err
			}
			st, err := lane.Describe(c.Context(), saved, &g.engines)
			if err != nil {
				return err
			}
			if output == "json" {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(g.streams.Out, string(b))
			} else {
				tw := tabwriter.NewWriter(g.streams.Out, 2, 4, 2, ' ', 0)
				fmt.Fprint(tw, lane.FormatStatus(st))
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			// CI scripts check the exit code: a degraded lane is a failure.
			if len(st.Problems) > 0 {
				return fmt.Errorf("lane %s is degraded (%d problems)", st.Name, len(st.Problems))
			}
			return nil
		},
	}
	lf = addLaneFlags(g, c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	outputFlag(c, &output, "text", "json")
	return c
}
