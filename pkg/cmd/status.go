package cmd

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/lane/config"
)

func newStatusCmd(g *globals) *cobra.Command {
	var output string
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "Show lanes, or one lane's nodes, PFs, VFs and allocatable",
		Example: `  sriov-lane status                  # every lane of this host
  sriov-lane status --name sriov
  sriov-lane status --name sriov -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return usagef("unknown output format %q: use text or json", output)
			}
			l, err := lf.load()
			if err != nil {
				return err
			}
			if lf.name == "" && lf.file == "" {
				names, err := lane.Lanes(l.StateDir)
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
			saved, err := lane.ResolveSaved(l)
			if err != nil {
				return err
			}
			st, err := lane.Describe(c.Context(), saved)
			if err != nil {
				return err
			}
			if output == "json" {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(g.streams.Out, string(b))
				return nil
			}
			tw := tabwriter.NewWriter(g.streams.Out, 2, 4, 2, ' ', 0)
			fmt.Fprint(tw, lane.FormatStatus(st))
			return tw.Flush()
		},
	}
	lf = addLaneFlags(c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return c
}
