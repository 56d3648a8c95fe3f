package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
)

func newPlanCmd(g *globals) *cobra.Command {
	var output string
	var configOnly, imagesOnly bool
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "plan",
		Short: "Print the defaulted lane config and every object up would apply; changes nothing",
		Long: `plan prints the fully defaulted lane config, then every Kubernetes object up would
apply for it, with the device plugin selecting the PFs discovery would pick on this host
(by their names, which they keep inside the nodes unless a name collides there).
plan never downloads: with cni calico, the pinned upstream manifests that are not
cached yet are listed with their URL, sha256 and size instead of their objects.

It also lists every image the lane pulls: the host's (the k3s node image, k3d's tools
image, the lane registry's), k3s's own (the sandbox image and those of the packaged
components a lane keeps, CoreDNS and local-path-provisioner with its helper), the
components' and verify's. --images prints only their upstream references, one a line,
for pre-seeding an imageRegistryMirror (the nodes' images, under the path the mirror
rule gives) or pulling them into the host's Docker for 'sriov-lane load --plan-images'.`,
		Example: `  sriov-lane plan
  sriov-lane plan --config lane.yaml -o yaml
  sriov-lane plan --config-only -o json
  sriov-lane plan --cni calico
  sriov-lane plan --images                        # one upstream image reference a line
  sriov-lane plan --images | xargs -n1 docker pull
  sriov-lane plan --network-resources-injector=true   # the webhook, with placeholder certificate data
  sriov-lane plan --vf-allocation dra   # dra-driver-sriov, its CRDs, DeviceClass and default policy, no device plugin
  sriov-lane plan --cni calico --ip-family dual   # both IP pools in the Installation
  sriov-lane plan --config-only --topology-manager-policy best-effort --datastore-on-tmpfs=false
  SRIOV_LANE_AGENTS=3 sriov-lane plan -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if imagesOnly && configOnly {
				return usagef("--images and --config-only each print one thing: use one")
			}
			l, err := lf.load()
			if err != nil {
				return err
			}
			var images []lane.Image
			var imageNotes []string
			var pfNames []string
			if !configOnly {
				// Read once: the images and the objects name the same PFs,
				// and a host without them is warned of once.
				pfNames = plannedPFNames(c, l, g)
				if images, imageNotes, err = lane.Images(c.Context(), l, pfNames); err != nil {
					return err
				}
			}
			if imagesOnly {
				for _, n := range imageNotes {
					g.log().Warnf("plan: %s", n)
				}
				for _, img := range images {
					fmt.Fprintln(g.streams.Out, img.Upstream)
				}
				return nil
			}
			var objs []*unstructured.Unstructured
			var pending []cni.PendingFetch
			if !configOnly {
				opts := lane.CNIOptions(l, pfNames)
				// plan never downloads: pinned manifests that are not
				// cached are shown as what up would fetch.
				opts.Calico.Offline = true
				cs, err := cni.Components(c.Context(), opts)
				if err != nil {
					return err
				}
				objs, pending = cni.Flatten(cs)
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
					if len(pending) > 0 {
						doc["fetch"] = pending
					}
					doc["images"] = images
					if len(imageNotes) > 0 {
						doc["imageNotes"] = imageNotes
					}
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
			for _, p := range pending {
				fmt.Fprintf(g.streams.Out, "# not cached: up fetches %s (sha256 %s, %d bytes) and applies its objects\n", p.URL, p.SHA256, p.Size)
			}
			writeImageComments(g.streams.Out, images, imageNotes)
			if l.Components.NetworkResourcesInjector {
				fmt.Fprintf(g.streams.Out, "# %s: the Secret's data and the webhook's caBundle are placeholders; up makes a CA and serving certificate\n", cni.InjectorName)
			}
			return cni.Render(g.streams.Out, objs, "yaml")
		},
	}
	lf = addLaneFlags(g, c, true)
	outputFlag(c, &output, "yaml", "json")
	c.Flags().BoolVar(&configOnly, "config-only", false, "print only the defaulted lane config")
	c.Flags().BoolVar(&imagesOnly, "images", false, "print only the images the lane pulls (upstream references, one a line)")
	return c
}

// plannedPFNames are the PFs up would lease now, or a placeholder (with a
// warning) where this host has none, so plan still shows the objects.
func plannedPFNames(c *cobra.Command, l *config.Lane, g *globals) []string {
	need := l.PFsNeeded()
	rep, err := lane.PFReportFunc(l)(c.Context())
	var names []string
	if err == nil {
		for _, pf := range rep.Usable {
			if l.EnoughVFs(pf.TotalVFs) && len(names) < need {
				names = append(names, pf.Name)
			}
		}
	}
	if len(names) < need {
		why := fmt.Sprintf("found %d usable of %d needed", len(names), need)
		if err != nil {
			why = err.Error()
		}
		g.log().Warnf("plan: no PFs to select on this host (%s); showing placeholder PF names", why)
		names = nil
		for i := 0; i < need; i++ {
			names = append(names, fmt.Sprintf("PF%d", i))
		}
	}
	return names
}

// writeImageComments lists the images as YAML comments ahead of the objects.
func writeImageComments(w io.Writer, images []lane.Image, notes []string) {
	fmt.Fprintln(w, "# images the lane pulls (pulled by, reference, what for; with a mirror, the path it must serve):")
	for _, img := range images {
		line := fmt.Sprintf("#   %-5s %s (%s)", img.PulledBy, img.Ref, img.For)
		if img.Mirror != "" && img.Mirror != img.Ref {
			line += " from the mirror's " + img.Mirror
		}
		fmt.Fprintln(w, line)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "#   note: %s\n", n)
	}
}
