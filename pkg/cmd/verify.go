package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/smoke"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var keep bool
	var lf *laneFlags
	c := &cobra.Command{
		Use:   "verify",
		Short: "After up: start a pod that takes one VF and check inside it that the VF arrived",
		Long: `verify applies the smoke objects to a running lane (a NetworkAttachmentDefinition of type
sriov and a busybox pod requesting one VF of the lane's resource through it), waits for
the pod to become Ready, then looks inside it through the API server's exec (as kubectl
exec does, no kubectl needed) and prints one line per check with what it found:

  pod Ready         the pod and the node it runs on
  PCIDEVICE env     the device plugin's PCIDEVICE_<PREFIX>_<NAME> variable (e.g.
                    PCIDEVICE_KUBEVIRT_IO_SRIOV_NET) holds one PCI address
  vfio device       vfio-pci lanes: /dev/vfio/<group> and /dev/vfio/vfio are char
                    devices in the pod (the group PCIDEVICE_..._INFO names, if it does)
  network-status    netdevice lanes: Multus's k8s.v1.cni.cncf.io/network-status
                    annotation lists the smoke network with an interface, an address in
                    ` + smoke.Subnet + ` and device-info naming the same PCI address
  interface in pod  netdevice lanes: that interface is in the pod's network namespace
                    with the annotation's MAC and address

A lane with vfAllocation dra has no device plugin resource: its smoke pod takes a
ResourceClaim from a ResourceClaimTemplate of DeviceClass ` + cni.DRADeviceClass + `
whose VfConfig names the smoke network (driver vfio-pci in vfio-pci mode), and the checks
are:

  pod Ready         as above
  SRIOVNETWORK env  the driver's SRIOVNETWORK_PCI_ADDRESSES holds one PCI address
  resource claim    the pod's claim is allocated that VF's device
  vfio device       vfio-pci lanes: as above, the group SRIOVNETWORK_<dev>_VFIO_DEVICE names
  interface in pod  netdevice lanes: ` + smoke.DRAInterface + `, which the driver's sriov-cni moved into
                    the pod, with an address in ` + smoke.Subnet + `

Afterwards it also waits until the pod's claim is gone (the driver unprepared the VF)
and deletes the template.

The first failed check ends verify (exit 1) with the pod, the check, what was expected,
what was found and the pod's last events.

Afterwards, pass or fail, verify deletes the pod, waits until it is gone (only then is
its VF free again) and deletes the NetworkAttachmentDefinition. --keep leaves both for
inspection; the next verify deletes a pod left that way before it starts.`,
		Example: `  sriov-lane verify
  sriov-lane verify --name lane2 --timeout 5m
  sriov-lane verify --keep    # then: kubectl exec sriov-lane-smoke -- env`,
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
			// The smoke objects need the options' defaults (their namespace),
			// not PF names: any name passes WithDefaults' check.
			opts, err := lane.CNIOptions(l, []string{"unused"}).WithDefaults()
			if err != nil {
				return err
			}
			v := &verifier{out: g.streams.Out, log: g.log(), kube: cluster, opts: opts, timeout: timeout, keep: keep}
			dev, err := v.run(c.Context())
			if err != nil {
				return err
			}
			of := l.Resource()
			if l.VFAllocation == config.VFAllocationDRA {
				of = "DeviceClass " + cni.DRADeviceClass
			}
			fmt.Fprintf(v.out, "lane %s: VF %s of %s (%s) reached pod %s\n", l.Name, dev.Address, of, l.VFDriver, v.pod())
			return nil
		},
	}
	lf = addLaneFlags(g, c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().DurationVar(&timeout, "timeout", defaultVerifyTimeout, "how long to wait for the pod to become Ready, and to be gone once deleted")
	c.Flags().BoolVar(&keep, "keep", false, "leave the smoke pod and NetworkAttachmentDefinition for inspection (the pod keeps its VF)")
	return c
}

// defaultVerifyTimeout is --timeout's default. On a lane up made ready the
// smoke pod needs a pull of busybox (cni.SmokeImage, a few MB, from the
// mirror when one is set), a VF from the device plugin and the SR-IOV CNI's
// attach: seconds when all is well. Three minutes leaves a cold pull over a
// slow link room, while a pod that never gets its VF (the failure verify
// exists to find) fails a CI job in minutes, not after the lane's own
// ten-minute up bound; its deletion, with a grace period of 1s, needs far
// less.
const defaultVerifyTimeout = 3 * time.Minute

// networkDeleteBound is what verify's cleanup allows beyond the pod's own
// wait (--timeout) for deleting the NetworkAttachmentDefinition: one API
// call.
const networkDeleteBound = 30 * time.Second

// verifier writes verify's results to out (stdout): the line of each check
// with what it found, and the VF that reached the pod, which are what
// verify proves. What it does on the way (pods deleted, kept) is progress,
// for log (stderr).
type verifier struct {
	out     io.Writer
	log     log.Logger
	kube    *kube.Clients
	opts    cni.Options
	timeout time.Duration
	keep    bool
}

func (v *verifier) pod() string { return v.opts.SmokeNamespace + "/" + smoke.PodName }

// run starts a fresh smoke pod, checks it and cleans up (unless keep),
// whatever happened.
func (v *verifier) run(ctx context.Context) (dev smoke.PCIDevice, err error) {
	ns := v.opts.SmokeNamespace
	objs, err := smoke.Objects(v.opts)
	if err != nil {
		return dev, err
	}
	// A pod left by --keep still holds its VF and would be checked as it
	// is: start from a new one.
	if err := v.deletePod(ctx, "deleted smoke pod %s left by an earlier verify"); err != nil {
		return dev, err
	}
	defer func() {
		if v.keep {
			v.log.V(0).Infof("kept pod %s and NetworkAttachmentDefinition %s/%s (--keep); the next verify deletes them", v.pod(), ns, smoke.NetworkName)
			return
		}
		// Also after Ctrl-C: a pod left behind would hold its VF.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.timeout+networkDeleteBound)
		defer cancel()
		cerr := v.deletePod(cctx, "deleted pod %s (gone, its VF is free again)")
		if cerr == nil && v.opts.VFAllocation == config.VFAllocationDRA {
			if cerr = smoke.WaitClaimsGone(cctx, v.kube.Typed, ns); cerr == nil {
				v.log.V(0).Infof("the pod's ResourceClaim is gone (the driver unprepared its VF)")
				cerr = smoke.DeleteClaimTemplate(cctx, v.kube.Typed, ns)
			}
		}
		if cerr == nil {
			cerr = smoke.DeleteNetwork(cctx, v.kube.Dynamic, ns)
		}
		if cerr == nil {
			v.log.V(0).Infof("deleted NetworkAttachmentDefinition %s/%s", ns, smoke.NetworkName)
		}
		if err != nil {
			err = fmt.Errorf("%w\n(the smoke pod is deleted; rerun with --keep to leave it for inspection)", err)
		}
		err = errors.Join(err, cerr)
	}()
	if err := cni.Apply(ctx, v.kube, objs, log.Noop); err != nil {
		return dev, err
	}
	wctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	if err := cni.WaitPodsReady(wctx, v.kube.Typed, ns, []string{smoke.PodName}); err != nil {
		return dev, fmt.Errorf("smoke pod %s did not become Ready: %w", v.pod(), err)
	}
	return smoke.Verify(ctx, v.kube, v.opts, func(check, found string) {
		fmt.Fprintf(v.out, "ok  %-17s %s\n", check+":", found)
	})
}

// deletePod deletes the smoke pod, if there is one, and waits at most the
// timeout for it to be gone; msg (with the pod's name) says it was.
func (v *verifier) deletePod(ctx context.Context, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	existed, err := smoke.DeletePod(ctx, v.kube.Typed, v.opts.SmokeNamespace)
	if existed && err == nil {
		v.log.V(0).Infof(msg, v.pod())
	}
	return err
}
