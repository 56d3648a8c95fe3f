package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newExportCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "export",
		Short:   "Export a lane's state for debugging",
		Example: `  sriov-lane export logs ./artifacts`,
		Args:    noArgs,
	}
	c.AddCommand(newExportLogsCmd(g))
	return c
}

func newExportLogsCmd(g *globals) *cobra.Command {
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "logs DIR",
		Short: "Write node logs, pod logs, events, node links, SR-IOV sysfs state and the journal to DIR/<lane>",
		Long: `export logs collects what a CI job keeps as an artifact to explain a failed lane:
node container logs, pod logs and events, each node's links, the SR-IOV sysfs state of
the lane's PFs, the journal and the saved config. It changes nothing.`,
		Example: `  sriov-lane export logs ./artifacts
  sriov-lane export logs --name lane2 "$ARTIFACTS"`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			l, err := lf.loadSaved()
			if err != nil {
				return err
			}
			out, err := lane.ExportLogs(c.Context(), l, &g.engines, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "exported lane %s to %s\n", l.Name, out)
			return nil
		},
	}
	lf = addLaneFlags(g, c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	return c
}
