package lane

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// Plan is what up would do for a lane, as `plan` shows it: the images the
// lane pulls and every object up would apply, with the device plugin
// selecting the PFs discovery would pick on this host.
type Plan struct {
	Images     []Image
	ImageNotes []string
	Objects    []*unstructured.Unstructured
	// Pending are the pinned manifests not cached yet, which up would
	// fetch: plan never downloads.
	Pending []cni.PendingFetch
}

// PlanLane plans l on this host. A host without the PFs l needs gets
// placeholder names, and logger a warning, so the plan still shows the
// objects.
func PlanLane(ctx context.Context, l *config.Lane, logger log.Logger) (*Plan, error) {
	pfNames := plannedPFNames(ctx, l, logger)
	p := &Plan{}
	var err error
	if p.Images, p.ImageNotes, err = Images(ctx, l, pfNames); err != nil {
		return nil, err
	}
	cs, err := plannedComponents(ctx, l, pfNames)
	if err != nil {
		return nil, err
	}
	p.Objects, p.Pending = cni.Flatten(cs)
	return p, nil
}

// plannedComponents are the components up would apply for l with its PFs
// named pfNames, never downloading (a pinned manifest not cached is
// pending): what plan shows, what the image list reads and what reset
// waits for.
func plannedComponents(ctx context.Context, l *config.Lane, pfNames []string) ([]cni.Component, error) {
	opts := CNIOptions(l, pfNames)
	opts.Calico.Offline = true
	return cni.Components(ctx, opts)
}

// plannedPFNames are the PFs up would lease now, or placeholders (with a
// warning) where this host has not enough of them.
func plannedPFNames(ctx context.Context, l *config.Lane, logger log.Logger) []string {
	need := l.PFsNeeded()
	rep, err := PFReportFunc(l)(ctx)
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
		logger.Warnf("plan: no PFs to select on this host (%s); showing placeholder PF names", why)
		names = nil
		for i := range need {
			names = append(names, fmt.Sprintf("PF%d", i))
		}
	}
	return names
}
