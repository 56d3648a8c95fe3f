package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newUpCmd(g *globals) *cobra.Command {
	var retain bool
	var kubevirtci string
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "up",
		Short: "Create a lane: cluster, PFs moved into agents, VFs, network components",
		Long: `up creates the k3d cluster, leases PFs, moves them into the agents, creates and binds
VFs, deploys Multus, sriov-cni, the device plugin and the CNI, and returns when every
agent advertises its VFs. On failure, Ctrl-C or SIGTERM it undoes everything it did,
PFs first, unless --retain.`,
		Example: `  sriov-lane up
  sriov-lane up --config lane.yaml -v
  sriov-lane up --agents 3 --pfs-per-node 2 --vf-driver netdevice
  SRIOV_LANE_NETWORK_RESOURCES_INJECTOR=true sriov-lane up   # pods get VF requests from their NADs
  KUBEVIRT_USE_DRA=true sriov-lane up   # = --vf-allocation dra: VFs in ResourceSlices through dra-driver-sriov
  sriov-lane up --ip-family dual --topology-manager-policy restricted --topology-manager-scope pod
  sriov-lane up --datastore-on-tmpfs=false   # k3s datastore on disk instead of a tmpfs
  sriov-lane up --kubevirtci _ci-configs/k3d-sriov   # writes .kubeconfig, .kubectl, config-provider-k3d-sriov.sh`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lf.load()
			if err != nil {
				return err
			}
			if kubevirtci != "" {
				if err := lane.CheckKubevirtciDir(kubevirtci); err != nil {
					return usagef("%v", err)
				}
			}
			// The k3d library leaves temp files behind (one hosts file per
			// node); give it a private temp dir that goes with this process.
			if tmp, err := os.MkdirTemp("", "sriov-lane-up-"); err == nil {
				defer os.RemoveAll(tmp)
				defer os.Setenv("TMPDIR", os.Getenv("TMPDIR"))
				os.Setenv("TMPDIR", tmp)
			}
			if !retain {
				note := interruptedUpNote
				g.note.Store(&note)
			}
			timings, err := lane.Up(c.Context(), l, lane.UpOptions{
				Engines: &g.engines, Out: g.streams.Err, Verbose: g.verbose, Retain: retain, KubevirtciDir: kubevirtci,
			})
			if err != nil {
				return err
			}
			var total float64
			for _, t := range timings {
				total += t.Duration.Seconds()
			}
			kc := l.KubeconfigPath()
			fmt.Fprintf(g.streams.Out, "lane %s is up (%.1fs)\n  export KUBECONFIG=%s\n  sriov-lane status --name %s\n", l.Name, total, kc, l.Name)
			return nil
		},
	}
	lf = addLaneFlags(g, c, true)
	c.Flags().BoolVar(&retain, "retain", false, "keep whatever was made when up fails (debugging); remove it with down")
	c.Flags().StringVar(&kubevirtci, "kubevirtci", "", "also write kubevirtci's provider files into this directory")
	return c
}
