package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/fleet"
)

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
