package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/fleet"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

func newFleetPFsCmd(g *globals) *cobra.Command {
	var path, node, sysfsRoot, output string
	var ret bool
	c := &cobra.Command{
		Use:   "pfs",
		Short: "On a fleet host: where each of its pool's PFs is, and --return those a dead job left astray",
		Long: `pfs, run on one of the fleet's SR-IOV hosts (as root, in the host's network
namespace), reports each PF the fleet file lists for it: free (here, under its own name,
without VFs: in the pool), away (not in this network namespace: in a running job's pod,
or in a netns that outlived its pod), to return (here but renamed by a job's pod whose
network namespace went without the CNI DEL, or with VFs a job left, which keep it out of
the device plugin's pool when the plugin next starts) or gone.

With --return it renames such PFs back to the host name their alias holds and removes
their VFs; PFs away or gone are left as they are. It exits 1 while a PF is to return or
gone.`,
		Example: `  sriov-lane fleet pfs --config fleet.yaml
  sriov-lane fleet pfs --config fleet.yaml --node sriov-host-1 --return -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			f, err := loadFleet(path)
			if err != nil {
				return err
			}
			if node == "" {
				if node, err = os.Hostname(); err != nil {
					return fmt.Errorf("finding this host's node name: %w (pass --node)", err)
				}
			}
			i := slices.IndexFunc(f.Hosts, func(h config.FleetHost) bool { return h.Node == node })
			if i < 0 {
				return usagef("the fleet file lists no host %q: pass --node with this host's Node name", node)
			}
			sys := sriov.Sysfs{Root: sysfsRoot}
			rep, err := fleet.PFs(sys, f.Hosts[i].PFs)
			if err != nil {
				return err
			}
			if ret {
				did, err := fleet.Return(c.Context(), sriov.Restorer{Sysfs: sys, VFIODir: config.DefaultVFIODir}, rep)
				for _, d := range did {
					g.log().Warn(d)
				}
				if err != nil {
					return err
				}
				if rep, err = fleet.PFs(sys, f.Hosts[i].PFs); err != nil {
					return err
				}
			}
			if output == "json" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Fprintln(g.streams.Out, string(b))
			} else {
				for _, r := range rep {
					line := fmt.Sprintf("%-12s %-14s %s", strings.ToUpper(r.State), r.PCI, r.Name)
					if len(r.Problems) > 0 {
						line += ": " + strings.Join(r.Problems, "; ")
					}
					fmt.Fprintln(g.streams.Out, line)
				}
			}
			if slices.ContainsFunc(rep, func(r fleet.PFReport) bool { return r.State == fleet.StateReturn || r.State == fleet.StateGone }) {
				return errors.New("PFs of this host are out of the pool: see the lines above (--return puts those here right)")
			}
			return nil
		},
	}
	fleetFile(c, &path)
	c.Flags().StringVar(&node, "node", "", "this host's Node name in the fleet file (default: the hostname)")
	c.Flags().StringVar(&sysfsRoot, "sysfs-root", config.DefaultSysfsRoot, "where the host's sysfs is mounted")
	c.Flags().BoolVar(&ret, "return", false, "rename PFs back to their host names and remove VFs jobs left")
	outputFlag(c, &output, "text", "json")
	return c
}
