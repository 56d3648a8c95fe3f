package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/lane/config"
)

func newPlanCmd(g *globals) *cobra.Command {
	var output string
	var configOnly bool
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "plan",
		Short: "Print the defaulted lane config and every object up would apply; changes nothing",
		Long: `plan prints the fully defaulted lane config, then every Kubernetes object up would
apply for it, with the device plugin selecting the PFs discovery would pick on this host
(by their names, which they keep inside the nodes unless a name collides there).`,
		Example: `  sriov-lane plan
  sriov-lane plan --config lane.yaml -o yaml
  sriov-lane plan --config-only -o json
  SRIOV_LANE_AGENTS=3 sriov-lane plan -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if output != "yaml" && output != "json" {
				return usagef("unknown output format %q: use yaml or json", output)
			}
			l, err := lf.load()
			if err != nil {
				return err
			}
			var objs []*unstructured.Unstructured
			if !configOnly {
				names := plannedPFNames(c, l, g)
				if objs, err = cni.Objects(c.Context(), lane.CNIOptions(l, names)); err != nil {
					return err
				}
			}
			if output == "json" {
				// One JSON document: the lane and the List of objects.
				doc := map[string]any{"lane": l}
				if !configOnly {
					var buf bytes.Buffer
					if err := cni.Render(&buf, objs, "json"); err != nil {
						return err
					}
					doc["objects"] = json.RawMessage(buf.Bytes())
				}
				b, err := json.MarshalIndent(doc, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(g.streams.Out, string(b))
				return nil
			}
			b, err := config.Marshal(l)
			if err != nil {
				return err
			}
			fmt.Fprint(g.streams.Out, string(b))
			if configOnly {
				return nil
			}
			fmt.Fprintln(g.streams.Out, "---")
			return cni.Render(g.streams.Out, objs, "yaml")
		},
	}
	lf = addLaneFlags(c, true)
	c.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	c.Flags().BoolVar(&configOnly, "config-only", false, "print only the defaulted lane config")
	return c
}

// plannedPFNames are the PFs up would lease now, or a placeholder (with a
// warning) where this host has none, so plan still shows the objects.
func plannedPFNames(c *cobra.Command, l *config.Lane, g *globals) []string {
	need := l.Agents * l.PFsPerNode
	rep, err := lane.PFReportFunc(l)(c.Context())
	var names []string
	if err == nil {
		for _, pf := range rep.Usable {
			if pf.TotalVFs >= l.VFsPerPF && len(names) < need {
				names = append(names, pf.Name)
			}
		}
	}
	if len(names) < need {
		why := fmt.Sprintf("found %d usable of %d needed", len(names), need)
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(g.streams.Err, "plan: no PFs to select on this host (%s); showing placeholder PF names\n", why)
		names = nil
		for i := 0; i < need; i++ {
			names = append(names, fmt.Sprintf("PF%d", i))
		}
	}
	return names
}
