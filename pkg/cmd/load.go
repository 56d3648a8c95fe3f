package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

func newLoadCmd(g *globals) *cobra.Command {
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "load IMAGE...",
		Short: "Import images from the host's Docker into every node of a lane",
		Long: `load streams host images into every node's containerd, like 'kind load docker-image':
the quickest way to try a locally built image without the registry.`,
		Example: `  sriov-lane load quay.io/kubevirt/virt-launcher:devel
  sriov-lane load --name lane2 my/image:tag other/image:tag`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, images []string) error {
			l, err := lf.loadSaved()
			if err != nil {
				return err
			}
			cli, err := g.docker()
			if err != nil {
				return err
			}
			if err := provider.NewWithClient(cli).Load(c.Context(), l.ClusterName(), images...); err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "loaded %d image(s) into lane %s\n", len(images), l.Name)
			return nil
		},
	}
	lf = addLaneFlags(c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	return c
}
