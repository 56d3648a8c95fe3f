package cmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newResetCmd(g *globals) *cobra.Command {
	var all bool
	var timeout time.Duration
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "reset",
		Short: "Return a running lane to the state up left it in, for the next CI job",
		Long: `reset returns a running lane to what up left, without recreating the cluster. up
records a baseline when it finishes: the UID of every namespace and every cluster-scoped
object. reset deletes every namespace not in it (one made again under a baseline name
goes too) and every cluster-scoped object not in it, webhooks and aggregated APIServices
first and CRDs last (their custom resources go with them), and waits until they are gone
(--timeout; on timeout it names what holds each namespace). It empties the namespaces it
deletes itself, pods first, and finalizes each once nothing is left in it, instead of
waiting out kube-controller-manager's fixed 5 s delay. It keeps what the system
makes on its own: nodes, CSRs, CSINodes, kube-apiserver's APIServices and IPAddresses,
anything named system:*, PriorityClasses system-*, Calico's IPAM objects.
Objects inside the baseline's namespaces are left as they are. Then it checks that every
PF is in its agent with its VFs as configured, repairs any that is not (as repair does),
and waits as up does until every agent advertises its VFs. A lane brought up before up
recorded baselines cannot be reset: down and up it once.`,
		Example: `  sriov-lane reset
  sriov-lane reset --name lane2 --timeout 5m
  sriov-lane reset --config lane.yaml -v   # names every object it deletes
  sriov-lane reset --all`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef("--timeout %s: must be positive", timeout)
			}
			return lf.eachLane(all, "not reset", func(l *config.Lane) error {
				start := time.Now()
				rep, err := lane.Reset(c.Context(), l, lane.ResetOptions{Engines: &g.engines, Out: g.streams.Err, Verbose: g.verbose, Timeout: timeout})
				if err != nil {
					return err
				}
				what := "nothing to delete"
				if n, o := len(rep.Namespaces), len(rep.Objects); n+o > 0 {
					what = fmt.Sprintf("deleted %d namespace(s) and %d cluster-scoped object(s)", n, o)
				}
				if len(rep.Repaired) > 0 {
					what += "; repaired " + strings.Join(rep.Repaired, ", ")
				}
				fmt.Fprintf(g.streams.Out, "lane %s reset (%s) in %.1fs\n", l.Name, what, time.Since(start).Seconds())
				return nil
			})
		},
	}
	lf = addLaneFlags(g, c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().BoolVar(&all, "all", false, "reset every lane of this host (this state dir)")
	c.Flags().DurationVar(&timeout, "timeout", lane.DefaultResetTimeout, "how long to wait for what reset deleted to be gone")
	return c
}
