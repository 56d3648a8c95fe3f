package smoke

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// RunOptions tune Run.
type RunOptions struct {
	// Timeout bounds the wait for the pod to become Ready, and for it to
	// be gone once deleted.
	Timeout time.Duration
	// Keep leaves the pod and its network for inspection.
	Keep bool
	// Log gets what Run does on the way (pods deleted, kept): progress.
	Log log.Logger
	// Report gets each passed check and what it found: the results.
	Report func(check, found string)
}

// networkDeleteBound is what the cleanup allows beyond the pod's own wait
// (Timeout) for deleting the NetworkAttachmentDefinition: one API call.
const networkDeleteBound = 30 * time.Second

// Run is what `verify` does on a lane that is up: it starts a fresh smoke
// pod, waits for it to be Ready, checks it (Verify) and cleans up, pass or
// fail, unless o.Keep.
func Run(ctx context.Context, kc *kube.Clients, opts cni.Options, o RunOptions) (PCIDevice, error) {
	objs, err := Objects(opts)
	if err != nil {
		return PCIDevice{}, err
	}
	ns := opts.SmokeNamespace
	// A pod left by --keep still holds its VF and would be checked as it
	// is: start from a new one.
	if err := deletePod(ctx, kc, opts, o, "deleted smoke pod %s left by an earlier verify"); err != nil {
		return PCIDevice{}, err
	}
	dev, err := applyAndCheck(ctx, kc, opts, objs, o)
	if o.Keep {
		o.Log.V(0).Infof("kept pod %s and NetworkAttachmentDefinition %s/%s (--keep); the next verify deletes them", podRef(opts), ns, NetworkName)
		return dev, err
	}
	// Also after Ctrl-C: a pod left behind would hold its VF.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Timeout+networkDeleteBound)
	defer cancel()
	cerr := cleanUp(cctx, kc, opts, o)
	if err != nil {
		err = fmt.Errorf("%w\n(the smoke pod is deleted; rerun with --keep to leave it for inspection)", err)
	}
	return dev, errors.Join(err, cerr)
}

func podRef(opts cni.Options) string { return opts.SmokeNamespace + "/" + PodName }

func applyAndCheck(ctx context.Context, kc *kube.Clients, opts cni.Options, objs []*unstructured.Unstructured, o RunOptions) (PCIDevice, error) {
	if err := cni.Apply(ctx, kc, objs, log.Noop); err != nil {
		return PCIDevice{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := cni.WaitPodsReady(wctx, kc.Typed, opts.SmokeNamespace, []string{PodName}); err != nil {
		return PCIDevice{}, fmt.Errorf("smoke pod %s did not become Ready: %w", podRef(opts), err)
	}
	return Verify(ctx, kc, opts, o.Report)
}

// cleanUp deletes the pod and waits until it is gone (only then is its VF
// free again), in dra mode waits for its claim to go and deletes the claim
// template, then deletes the network.
func cleanUp(ctx context.Context, kc *kube.Clients, opts cni.Options, o RunOptions) error {
	ns := opts.SmokeNamespace
	if err := deletePod(ctx, kc, opts, o, "deleted pod %s (gone, its VF is free again)"); err != nil {
		return err
	}
	if opts.VFAllocation == config.VFAllocationDRA {
		if err := WaitClaimsGone(ctx, kc.Typed, ns); err != nil {
			return err
		}
		o.Log.V(0).Infof("the pod's ResourceClaim is gone (the driver unprepared its VF)")
		if err := DeleteClaimTemplate(ctx, kc.Typed, ns); err != nil {
			return err
		}
	}
	if err := DeleteNetwork(ctx, kc.Dynamic, ns); err != nil {
		return err
	}
	o.Log.V(0).Infof("deleted NetworkAttachmentDefinition %s/%s", ns, NetworkName)
	return nil
}

// deletePod deletes the smoke pod, if there is one, and waits at most the
// timeout for it to be gone; msg (with the pod's name) says it was.
func deletePod(ctx context.Context, kc *kube.Clients, opts cni.Options, o RunOptions, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	existed, err := DeletePod(ctx, kc.Typed, opts.SmokeNamespace)
	if existed && err == nil {
		o.Log.V(0).Infof(msg, podRef(opts))
	}
	return err
}
