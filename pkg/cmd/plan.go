package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

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
			var p *lane.Plan
			if !configOnly {
				if p, err = lane.PlanLane(c.Context(), l, g.log()); err != nil {
					return err
				}
			}
			switch {
			case imagesOnly:
				for _, n := range p.ImageNotes {
					g.log().Warnf("plan: %s", n)
				}
				for _, img := range p.Images {
					fmt.Fprintln(g.streams.Out, img.Upstream)
				}
				return nil
			case output == "json":
				return writePlanJSON(g.streams.Out, l, p)
			}
			return writePlanYAML(g.streams.Out, l, p)
		},
	}
	lf = addLaneFlags(g, c, true)
	outputFlag(c, &output, "yaml", "json")
	c.Flags().BoolVar(&configOnly, "config-only", false, "print only the defaulted lane config")
	c.Flags().BoolVar(&imagesOnly, "images", false, "print only the images the lane pulls (upstream references, one a line)")
	return c
}

// writePlanJSON writes one JSON document: the lane and, unless p is nil
// (--config-only), the List of objects, what up would fetch and the
// images.
func writePlanJSON(w io.Writer, l *config.Lane, p *lane.Plan) error {
	doc := map[string]any{"lane": l}
	if p != nil {
		var buf bytes.Buffer
		if err := cni.Render(&buf, p.Objects, "json"); err != nil {
			return err
		}
		doc["objects"] = json.RawMessage(buf.Bytes())
		if len(p.Pending) > 0 {
			doc["fetch"] = p.Pending
		}
		doc["images"] = p.Images
		if len(p.ImageNotes) > 0 {
			doc["imageNotes"] = p.ImageNotes
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// writePlanYAML writes the lane config and, unless p is nil
// (--config-only), "---" and the objects, with what up would fetch and the
// images as comments ahead of them.
func writePlanYAML(w io.Writer, l *config.Lane, p *lane.Plan) error {
	b, err := config.Marshal(l)
	if err != nil {
		return err
	}
	fmt.Fprint(w, string(b))
	if p == nil {
		return nil
	}
	fmt.Fprintln(w, "---")
	for _, f := range p.Pending {
		fmt.Fprintf(w, "# not cached: up fetches %s (sha256 %s, %d bytes) and applies its objects\n", f.URL, f.SHA256, f.Size)
	}
	writeImageComments(w, p.Images, p.ImageNotes)
	if l.Components.NetworkResourcesInjector {
		fmt.Fprintf(w, "# %s: the Secret's data and the webhook's caBundle are placeholders; up makes a CA and serving certificate\n", cni.InjectorName)
	}
	return cni.Render(w, p.Objects, "yaml")
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
