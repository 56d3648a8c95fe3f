package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
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
			dev, err := smoke.Run(c.Context(), cluster, opts, smoke.RunOptions{
				Timeout: timeout, Keep: keep, Log: g.log(),
				Report: func(check, found string) { fmt.Fprintf(g.streams.Out, "ok  %-17s %s\n", check+":", found) },
			})
			if err != nil {
				return err
			}
			of := l.Resource()
			if l.VFAllocation == config.VFAllocationDRA {
				of = "DeviceClass " + cni.DRADeviceClass
			}
			fmt.Fprintf(g.streams.Out, "lane %s: VF %s of %s (%s) reached pod %s/%s\n", l.Name, dev.Address, of, l.VFDriver, opts.SmokeNamespace, smoke.PodName)
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
