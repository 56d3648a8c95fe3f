package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "verify",
		Short: "After up: start a pod that takes one VF through an sriov NetworkAttachmentDefinition",
		Long: `verify applies the smoke objects (a NetworkAttachmentDefinition of type sriov and a
pod requesting one VF) to a running lane and waits for the pod to become Ready: a
quick end-to-end check on real hardware.`,
		Example: `  sriov-lane verify
  sriov-lane verify --name lane2 --timeout 5m`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lf.loadSaved()
			if err != nil {
				return err
			}
			kc := l.KubeconfigPath()
			cluster, err := kube.Connect(kc)
			if err != nil {
				return fmt.Errorf("lane %s: %w (is the lane up?)", l.Name, err)
			}
			opts := lane.CNIOptions(l, []string{"unused"})
			opts.Smoke = true
			objs, err := cni.SmokeObjects(opts)
			if err != nil {
				return err
			}
			if err := cni.Apply(c.Context(), cluster, objs, nil); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			ns := opts.SmokeNamespace
			if ns == "" {
				ns = "default"
			}
			if err := cni.WaitPodsReady(ctx, cluster.Typed, ns, []string{cni.SmokePodName}); err != nil {
				return fmt.Errorf("smoke pod %s/%s did not become Ready: %w", ns, cni.SmokePodName, err)
			}
			fmt.Fprintf(g.streams.Out, "lane %s: pod %s/%s runs with a VF from %s\n", l.Name, ns, cni.SmokePodName, l.Resource())
			return nil
		},
	}
	lf = addLaneFlags(c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the pod")
	return c
}
