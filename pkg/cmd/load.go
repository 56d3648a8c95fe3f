package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

func newLoadCmd(g *globals) *cobra.Command {
	var lf *laneFlags
	var planImages bool
	c := &cobra.Command{
		Use:   "load [IMAGE...]",
		Short: "Import images from the host's Docker into every node of a lane",
		Long: `load streams host images into every node's containerd, like 'kind load docker-image':
the quickest way to try a locally built image without the registry.

--plan-images also loads every image the lane's nodes pull that 'sriov-lane plan'
lists (k3s's sandbox image, CoreDNS, local-path-provisioner and its helper, the
components', verify's), under the reference the nodes ask for: the upstream name, or,
with imageRegistryMirror, the mirror's for the components' images. Pull them into the
host's Docker first (sriov-lane plan --images). Pods that could not pull start once
kubelet tries again; a lane whose nodes never reach a registry is better served by a
pre-seeded imageRegistryMirror, which up needs no second command for.`,
		Example: `  sriov-lane load quay.io/kubevirt/virt-launcher:devel
  sriov-lane load --name lane2 my/image:tag other/image:tag
  sriov-lane load --plan-images                  # what plan --images lists for the nodes`,
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: func(c *cobra.Command, images []string) error {
			if len(images) == 0 && !planImages {
				return usagef("name at least one image, or --plan-images")
			}
			l, err := lf.loadSaved()
			if err != nil {
				return err
			}
			if planImages {
				planned, err := lane.NodeImageRefs(c.Context(), l)
				if err != nil {
					return err
				}
				images = append(planned, images...)
			}
			cli, err := g.engines.Client(l.ContainerEngine)
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
	lf = addLaneFlags(g, c, false)
	c.Flags().BoolVar(&planImages, "plan-images", false, "also load every image the lane's nodes pull (plan's list)")
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	return c
}
