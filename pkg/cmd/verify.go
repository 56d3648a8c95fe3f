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
                    ` + cni.SmokeSubnet + ` and device-info naming the same PCI address
  interface in pod  netdevice lanes: that interface is in the pod's network namespace
                    with the annotation's MAC and address

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
			opts := lane.CNIOptions(l, []string{"unused"})
			opts.Smoke = true
			if opts.SmokeNamespace == "" {
				opts.SmokeNamespace = "default"
			}
			v := &verifier{out: g.streams.Out, kube: cluster, opts: opts, timeout: timeout, keep: keep}
			dev, err := v.run(c.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(v.out, "lane %s: VF %s of %s (%s) reached pod %s\n", l.Name, dev.Address, l.Resource(), l.VFDriver, v.pod())
			return nil
		},
	}
	lf = addLaneFlags(c, false)
	lf.settings = config.AddFlagsOnly(c.Flags(), "state-dir")
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the pod to become Ready, and to be gone once deleted")
	c.Flags().BoolVar(&keep, "keep", false, "leave the smoke pod and NetworkAttachmentDefinition for inspection (the pod keeps its VF)")
	return c
}

type verifier struct {
	out     io.Writer
	kube    *kube.Clients
	opts    cni.Options
	timeout time.Duration
	keep    bool
}

func (v *verifier) pod() string { return v.opts.SmokeNamespace + "/" + cni.SmokePodName }

// run starts a fresh smoke pod, checks it and cleans up (unless keep),
// whatever happened.
func (v *verifier) run(ctx context.Context) (dev cni.PCIDevice, err error) {
	ns := v.opts.SmokeNamespace
	objs, err := cni.SmokeObjects(v.opts)
	if err != nil {
		return dev, err
	}
	// A pod left by --keep still holds its VF and would be checked as it
	// is: start from a new one.
	if err := v.deletePod(ctx, "deleted smoke pod %s left by an earlier verify\n"); err != nil {
		return dev, err
	}
	defer func() {
		if v.keep {
			fmt.Fprintf(v.out, "kept pod %s and NetworkAttachmentDefinition %s/%s (--keep); the next verify deletes them\n", v.pod(), ns, cni.SmokeNetworkName)
			return
		}
		// Also after Ctrl-C: a pod left behind would hold its VF.
		cctx := context.WithoutCancel(ctx)
		cerr := v.deletePod(cctx, "deleted pod %s (gone, its VF is free again)\n")
		if cerr == nil {
			cerr = cni.DeleteSmokeNetwork(cctx, v.kube.Dynamic, ns)
		}
		if cerr == nil {
			fmt.Fprintf(v.out, "deleted NetworkAttachmentDefinition %s/%s\n", ns, cni.SmokeNetworkName)
		}
		if err != nil {
			err = fmt.Errorf("%w\n(the smoke pod is deleted; rerun with --keep to leave it for inspection)", err)
		}
		err = errors.Join(err, cerr)
	}()
	if err := cni.Apply(ctx, v.kube, objs, nil); err != nil {
		return dev, err
	}
	wctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	if err := cni.WaitPodsReady(wctx, v.kube.Typed, ns, []string{cni.SmokePodName}); err != nil {
		return dev, fmt.Errorf("smoke pod %s did not become Ready: %w", v.pod(), err)
	}
	return cni.VerifySmoke(ctx, v.kube, v.opts, func(check, found string) {
		fmt.Fprintf(v.out, "ok  %-17s %s\n", check+":", found)
	})
}

// deletePod deletes the smoke pod, if there is one, and waits at most the
// timeout for it to be gone; msg (with the pod's name) says it was.
func (v *verifier) deletePod(ctx context.Context, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	existed, err := cni.DeleteSmokePod(ctx, v.kube.Typed, v.opts.SmokeNamespace)
	if existed && err == nil {
		fmt.Fprintf(v.out, msg, v.pod())
	}
	return err
}
