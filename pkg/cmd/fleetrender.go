package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/fleet"
)

func newFleetRenderCmd(g *globals) *cobra.Command {
	var path, output string
	c := &cobra.Command{
		Use:   "render",
		Short: "Print the fleet cluster's objects: the device plugin with a pool of whole PFs, the host-device network",
		Long: `render prints the objects a fleet's cluster needs on its SR-IOV hosts, for kubectl
apply: a namespace with the SR-IOV network device plugin, configured on each host with a
pool of the PFs the fleet file lists there (by PCI address, so the uplink and any PF left
out never join), and a host-device NetworkAttachmentDefinition with that resource. It
changes nothing. Multus and the host-device plugin must already be on the cluster.`,
		Example: `  sriov-lane fleet render --config fleet.yaml | kubectl apply -f -
  sriov-lane fleet render --config fleet.yaml -o json`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			f, err := loadFleet(path)
			if err != nil {
				return err
			}
			return fleet.Render(g.streams.Out, f, output)
		},
	}
	fleetFile(c, &path)
	outputFlag(c, &output, "yaml", "json")
	return c
}
