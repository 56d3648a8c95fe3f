package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func newFleetCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Objects for a CI cluster of SR-IOV hosts whose jobs each take whole PFs",
		Long: `fleet renders what a CI cluster of SR-IOV hosts needs so that each job pod gets
whole PFs, counted by the device plugin and the kubelet and moved into the pod by Multus
and the host-device plugin, and the job a Prow config can paste. The fleet file names
each host's Node and the PCI addresses of the PFs jobs may take there.`,
		Example: `  sriov-lane fleet render --config fleet.yaml | kubectl apply -f -
  sriov-lane fleet job --config fleet.yaml --prow`,
		Args: noArgs,
	}
	c.AddCommand(newFleetRenderCmd(g), newFleetJobCmd(g), newFleetPFsCmd(g))
	return c
}

// fleetFile is the --config flag of the fleet commands.
func fleetFile(c *cobra.Command, path *string) {
	c.Flags().StringVar(path, "config", "", "the fleet file (required)")
}

func loadFleet(path string) (*config.Fleet, error) {
	if path == "" {
		return nil, usagef("--config is required: the fleet file naming each SR-IOV host and its PFs")
	}
	return config.LoadFleet(path)
}
