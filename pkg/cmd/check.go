package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newCheckCmd(g *globals) *cobra.Command {
	var output string
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "check",
		Short: "Check this host is ready for a lane; changes nothing",
		Long: `check runs the preflight checks of 'up' without changing anything: root, Docker,
the k3s image, the cgroup version, sysfs, SR-IOV PF candidates, VFIO, IOMMU groups and
free ports. It exits 1 when a hard requirement fails.`,
		Example: `  sriov-lane check
  sriov-lane check --config lane.yaml -o json
  sriov-lane check --sysfs-root /host/sys --agents 3`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lf.load()
			if err != nil {
				return err
			}
			ck := &lane.Checker{Lane: l, Engines: &g.engines, PFs: lane.PFReportFunc(l)}
			results := ck.Run(c.Context())
			if output == "json" {
				b, _ := json.MarshalIndent(results, "", "  ")
				fmt.Fprintln(g.streams.Out, string(b))
			} else {
				for _, r := range results {
					line := fmt.Sprintf("%-4s  %-16s %s", strings.ToUpper(r.Status.String()), r.Name, r.Message)
					if r.Hint != "" && r.Status != lane.Pass {
						line += "\n      hint: " + r.Hint
					}
					fmt.Fprintln(g.streams.Out, line)
				}
			}
			if lane.Failed(results) {
				return errors.New("preflight failed: fix the FAIL lines above")
			}
			return nil
		},
	}
	lf = addLaneFlags(g, c, true)
	outputFlag(c, &output, "text", "json")
	return c
}
