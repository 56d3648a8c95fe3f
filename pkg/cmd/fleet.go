package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/fleet"
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

func newFleetJobCmd(g *globals) *cobra.Command {
	var path string
	var prow bool
	c := &cobra.Command{
		Use:   "job",
		Short: "Print the job template: a pod taking the fleet's job.pfs whole PFs, or a Prow presubmit",
		Long: `job prints one job of the fleet: a privileged pod requesting job.pfs PFs of the
fleet's resource and naming its network as often, with its own Docker and /dev/vfio,
running job.command (by default sriov-lane up, verify and down). The
scheduler puts it on a host with that many PFs free, or keeps it Pending until one has.
With --prow, the same as a presubmit to paste under presubmits.<org/repo> of a Prow job
config, its name, labels, annotation and spec filled in.`,
		Example: `  sriov-lane fleet job --config fleet.yaml | kubectl create -f -
  sriov-lane fleet job --config fleet.yaml --prow`,
		Args: noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			f, err := loadFleet(path)
			if err != nil {
				return err
			}
			b, err := fleet.JobYAML(f, prow)
			if err != nil {
				return err
			}
			_, err = g.streams.Out.Write(b)
			return err
		},
	}
	fleetFile(c, &path)
	c.Flags().BoolVar(&prow, "prow", false, "print a Prow presubmit instead of a pod")
	return c
}
