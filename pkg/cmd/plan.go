package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/lane/config"
)

func newPlanCmd(g *globals) *cobra.Command {
	var output string
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "plan",
		Short: "Print the fully defaulted lane config without changing anything",
		Example: `  sriov-lane plan
  sriov-lane plan --config lane.yaml -o yaml
  SRIOV_LANE_AGENTS=3 sriov-lane plan -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lf.load()
			if err != nil {
				return err
			}
			var b []byte
			switch output {
			case "yaml", "":
				b, err = config.Marshal(l)
			case "json":
				b, err = config.MarshalJSON(l)
				b = append(b, '\n')
			default:
				return usagef("unknown output format %q: use yaml or json", output)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(g.streams.Out, string(b))
			return err
		},
	}
	lf = addLaneFlags(c, true)
	c.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return c
}
