package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// States of a fleet host's PF, as PFs reports them.
const (
	// StateFree: in this netns under its own name, without VFs, on a
	// driver: a device of the pool, which kubelet may hand to a job.
	StateFree = "free"
	// StateAway: no netdev of it in this netns: in a running job's pod,
	// or in a netns that outlived its pod (a PF comes back only when the
	// last reference to that netns goes).
	StateAway = "away"
	// StateReturn: here, but not as the pool wants it (Problems say how);
	// Return puts it right.
	StateReturn = "to return"
	// StateGone: no such PCI function (or not an SR-IOV PF).
	StateGone = "gone"
)

// PFReport is one of a fleet host's PFs as this host's kernel shows it.
type PFReport struct {
	PCI string `json:"pci"`
	// Name is its netdev in this netns; Alias is its ifalias, where the
	// host-device plugin keeps the host's name while a pod has it.
	Name   string `json:"name,omitempty"`
	Alias  string `json:"alias,omitempty"`
	Driver string `json:"driver,omitempty"`
	NumVFs int    `json:"numVFs"`
	State  string `json:"state"`
	// Problems say what keeps a PF that is here from the pool.
	Problems []string `json:"problems,omitempty"`
}

// PFs reports the PFs at pcis (a host's entry of the fleet file) as the
// kernel shows them to this process: sysfs at sys, links in its netns.
//
// A job pod that dies without its CNI DEL (its node restarted, its netns
// torn down before the DEL came) leaves its PFs to the kernel: when the
// pod's netns goes, a physical PF returns to the init netns, down, under
// the name it had in the pod (net1, ...) or devN if that is taken there,
// its ifalias still the host's name the host-device plugin stored on ADD
// (torvalds/linux net/core/dev.c default_device_exit_net, read in the
// 6.12 series; shown on QEMU's igb by the kernel tier). The device plugin
// keeps offering it (its devices are PCI addresses, found once at start,
// never marked unhealthy: sriov-network-device-plugin
// pkg/resources/pool_stub.go@v3.11.0 Probe), and host-device finds it by
// its PCI address whatever its name, so the next job gets it. What does
// not mend itself: the pod's name on the host, and VFs a job left, with
// which the plugin leaves the PF out of its pool the next time it starts
// (pkg/netdevice/netDeviceProvider.go@v3.11.0 AddTargetDevices).
func PFs(sys sriov.Sysfs, pcis []string) ([]PFReport, error) {
	found, err := sriov.Discover(sys)
	if err != nil {
		return nil, err
	}
	var out []PFReport
	for _, pci := range pcis {
		i := slices.IndexFunc(found, func(p sriov.PF) bool { return p.PCI == pci })
		if i < 0 {
			out = append(out, PFReport{PCI: pci, State: StateGone})
			continue
		}
		pf := found[i]
		r := PFReport{PCI: pci, Driver: pf.Driver, NumVFs: pf.NumVFs}
		if !pf.Present {
			r.State = StateAway
			out = append(out, r)
			continue
		}
		r.Name, r.Alias = pf.Name, pf.Alias
		if r.Alias != "" && r.Alias != r.Name {
			r.Problems = append(r.Problems, fmt.Sprintf("named %s, as a job's pod named it: its netns went without the CNI DEL that renames it %s", r.Name, r.Alias))
		}
		if r.NumVFs > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%d VFs a job left: the device plugin leaves it out of the pool when it next starts", r.NumVFs))
		}
		if r.Driver == "" {
			r.Problems = append(r.Problems, "no driver: the device plugin leaves it out of the pool; bind its NIC's driver")
		}
		r.State = StateFree
		if len(r.Problems) > 0 {
			r.State = StateReturn
		}
		out = append(out, r)
	}
	return out, nil
}

// Return puts each PF of rep that is here but not as the pool wants it
// back: its VFs removed as down removes them (d's bound on their VFIO
// holders), then the host's name from its alias (down, the alias cleared,
// as the host-device plugin's DEL leaves it: containernetworking/plugins
// plugins/main/host-device/host-device.go@v1.9.1 moveLinkOut). A PF
// away or gone is left as it is. It keeps no journal: each step only
// brings a PF toward the state the pool had it in, and running it again
// finishes what an interrupted run began. It returns what it did, one
// line a step.
func Return(ctx context.Context, d sriov.Restorer, rep []PFReport) ([]string, error) {
	var did []string
	var errs []error
	for _, r := range rep {
		if r.State != StateReturn {
			continue
		}
		// VFs first: the kernel names the netdevs of new kernel-driver VFs
		// ethN, and with the PF away one may have taken its host name
		// (igbvf on QEMU's igb did, in the kernel tier).
		if r.NumVFs > 0 {
			note, err := d.RemoveVFs(ctx, r.PCI)
			if err != nil {
				errs = append(errs, fmt.Errorf("PF %s: %w", r.PCI, err))
				continue
			}
			line := fmt.Sprintf("PF %s: removed its %d VFs", r.PCI, r.NumVFs)
			if note != "" {
				line += " (" + note + ")"
			}
			did = append(did, line)
		}
		if r.Alias != "" && r.Alias != r.Name {
			if _, err := sriov.RenameToAlias(r.Name); err != nil {
				errs = append(errs, fmt.Errorf("PF %s: %w", r.PCI, err))
				continue
			}
			did = append(did, fmt.Sprintf("PF %s: renamed %s back to %s", r.PCI, r.Name, r.Alias))
		}
	}
	return did, errors.Join(errs...)
}
