package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Journal operations of VF set-up.
const (
	OpAutoprobe = "sriov.autoprobe"
	OpNumVFs    = "sriov.numvfs"
	OpBind      = "sriov.bind"
)

// driverKernel in a BindRecord means "whatever kernel driver probing picks".
const driverKernel = "kernel"

// VFOptions say how many VFs a PF gets and how they are bound.
type VFOptions struct {
	Count int
	// Mode is the lane's vfDriver: config.VFDriverVFIO (the default) binds
	// the VFs to vfio-pci, config.VFDriverNetdevice keeps kernel netdevs.
	Mode string
	// Target receives the VF netdevs in netdevice mode (the PF's node).
	Target NetnsTarget
}

// VF is one created virtual function.
type VF struct {
	PCI    string `json:"pci"`
	Index  int    `json:"index"`
	Driver string `json:"driver"`
	// Netdev and MAC are set in netdevice mode: the VF's link in the target.
	Netdev string `json:"netdev,omitempty"`
	MAC    string `json:"mac,omitempty"`
}

// DriverOrNone is the VF's driver, or "none" when it has none (how status
// and export print it).
func (vf VF) DriverOrNone() string {
	if vf.Driver == "" {
		return "none"
	}
	return vf.Driver
}

// ListVFs lists pf's VFs in index order with the driver each is bound to
// ("" for none), as sysfs shows them now: virtfn<N> of the PF points at VF
// N. A VF whose link or driver cannot be read is left out or listed
// without a driver; a PF without VFs has none.
func (s Sysfs) ListVFs(pf string) []VF {
	links, _ := filepath.Glob(s.Attr(pf, "virtfn*"))
	var out []VF
	for _, l := range links {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		if err != nil {
			continue
		}
		target, err := os.Readlink(l)
		if err != nil {
			continue
		}
		vf := VF{PCI: filepath.Base(target), Index: n}
		vf.Driver, _ = s.Driver(vf.PCI)
		out = append(out, vf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// AutoprobeRecord is the journal data of OpAutoprobe.
type AutoprobeRecord struct {
	PCI      string `json:"pci"`
	Original string `json:"original"`
}

// NumVFsRecord is the journal data of OpNumVFs.
type NumVFsRecord struct {
	PCI      string `json:"pci"`
	Original int    `json:"original"`
	Count    int    `json:"count"`
}

// BindRecord is the journal data of OpBind.
type BindRecord struct {
	VF       string `json:"vf"`
	PF       string `json:"pf"`
	Original string `json:"original"`
	Driver   string `json:"driver"`
}

// ConfigureVFs creates opts.Count VFs on the PF through its PCI device's
// sysfs (global: this works while the PF sits in a node's netns) and binds
// them. Autoprobe is switched off first so no transient VF netdevs appear.
func (s *Session) ConfigureVFs(ctx context.Context, pf PF, opts VFOptions) ([]VF, error) {
	vfs, err := s.configureVFs(ctx, pf, opts)
	if err != nil {
		return nil, fmt.Errorf("creating %d VFs on %s: %w", opts.Count, pf, err)
	}
	return vfs, nil
}

func (s *Session) configureVFs(ctx context.Context, pf PF, opts VFOptions) ([]VF, error) {
	if opts.Mode == "" {
		opts.Mode = config.VFDriverVFIO
	}
	total, err := s.Sysfs.ReadInt(pf.PCI, "sriov_totalvfs")
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Count < 0 || opts.Count > total:
		return nil, fmt.Errorf("%d VFs requested, the device supports 0..%d", opts.Count, total)
	case opts.Mode == config.VFDriverVFIO:
		if _, err := os.Stat(filepath.Join(s.Sysfs.Root, "module", "vfio_pci")); err != nil {
			return nil, fmt.Errorf("the vfio_pci module is not loaded (load it with modprobe vfio-pci): %w", err)
		}
	case opts.Mode == config.VFDriverNetdevice:
		if opts.Target == nil {
			return nil, fmt.Errorf("netdevice mode needs a target netns for the VF netdevs")
		}
	default:
		return nil, fmt.Errorf("unknown VF mode %q (want %s or %s)", opts.Mode, config.VFDriverVFIO, config.VFDriverNetdevice)
	}

	origProbe, err := s.Sysfs.ReadAttr(pf.PCI, "sriov_drivers_autoprobe")
	if err != nil {
		return nil, err
	}
	e, err := s.begin(OpAutoprobe, AutoprobeRecord{PCI: pf.PCI, Original: origProbe})
	if err != nil {
		return nil, err
	}
	if err := WriteFile(s.Sysfs.Attr(pf.PCI, "sriov_drivers_autoprobe"), "0"); err != nil {
		return nil, err
	}
	if err := s.done(e); err != nil {
		return nil, err
	}

	origNum, err := s.Sysfs.ReadInt(pf.PCI, "sriov_numvfs")
	if err != nil {
		return nil, err
	}
	if e, err = s.begin(OpNumVFs, NumVFsRecord{PCI: pf.PCI, Original: origNum, Count: opts.Count}); err != nil {
		return nil, err
	}
	// The kernel refuses to change a non-zero count to another non-zero one.
	if err := setNumVFs(s.Sysfs, pf.PCI, 0); err != nil {
		return nil, err
	}
	if err := setNumVFs(s.Sysfs, pf.PCI, opts.Count); err != nil {
		return nil, err
	}
	if err := s.done(e); err != nil {
		return nil, err
	}

	vfs := make([]VF, 0, opts.Count)
	for j := range opts.Count {
		target, err := os.Readlink(s.Sysfs.Attr(pf.PCI, "virtfn"+strconv.Itoa(j)))
		if err != nil {
			return nil, fmt.Errorf("reading VF %d: %w", j, err)
		}
		vf := VF{PCI: filepath.Base(target), Index: j}
		if opts.Mode == config.VFDriverVFIO {
			err = s.bindVFIO(pf.PCI, vf.PCI)
			vf.Driver = config.VFDriverVFIO
		} else {
			vf, err = s.bindNetdevice(ctx, pf.PCI, vf, opts.Target)
		}
		if err != nil {
			return nil, fmt.Errorf("VF %d (%s): %w", j, vf.PCI, err)
		}
		vfs = append(vfs, vf)
	}
	return vfs, nil
}

// setNumVFs writes sriov_numvfs. The kernel creates (or removes) the VFs
// before the write returns, or fails it: EBUSY for a nonzero count over
// another, ERANGE above sriov_totalvfs, ENOENT without a PF driver.
// Removing VFs blocks while one is held through VFIO (see Restorer.waitVFsFree).
func setNumVFs(sys Sysfs, pci string, n int) error {
	return WriteFile(sys.Attr(pci, "sriov_numvfs"), strconv.Itoa(n))
}

func (s *Session) bindVFIO(pf, vf string) error {
	cur, err := s.Sysfs.Driver(vf)
	if err != nil {
		return err
	}
	e, err := s.begin(OpBind, BindRecord{VF: vf, PF: pf, Original: cur, Driver: config.VFDriverVFIO})
	if err != nil {
		return err
	}
	if cur != config.VFDriverVFIO {
		if err := unbind(s.Sysfs, vf, cur); err != nil {
			return err
		}
		if err := WriteFile(s.Sysfs.Attr(vf, "driver_override"), config.VFDriverVFIO); err != nil {
			return err
		}
		if err := WriteFile(s.Sysfs.DriverFile(config.VFDriverVFIO, "bind"), vf); err != nil {
			return err
		}
		// Left set, the override would keep the VF on vfio-pci after the
		// lane is gone and confuse the next driver probe.
		if err := WriteFile(s.Sysfs.Attr(vf, "driver_override"), ""); err != nil {
			return err
		}
	}
	return s.done(e)
}

func (s *Session) bindNetdevice(ctx context.Context, pf string, vf VF, target NetnsTarget) (VF, error) {
	cur, err := s.Sysfs.Driver(vf.PCI)
	if err != nil {
		return vf, err
	}
	e, err := s.begin(OpBind, BindRecord{VF: vf.PCI, PF: pf, Original: cur, Driver: driverKernel})
	if err != nil {
		return vf, err
	}
	if cur == "" {
		if err := s.probeVF(pf, vf.PCI); err != nil {
			return vf, err
		}
	}
	if err := s.done(e); err != nil {
		return vf, err
	}
	if vf.Driver, err = s.Sysfs.Driver(vf.PCI); err != nil {
		return vf, err
	}
	// The device plugin advertises a VF only when it has a driver, and
	// sriov-cni moves a netdevice VF's netdev: a VF without either would
	// leave allocatable short until up's wait times out. Say so here.
	if err := netdeviceDriverProblem(s.Sysfs, vf); err != nil {
		return vf, err
	}
	// The VF driver registers the netdev from deferred work (iavf's
	// init task), after the probe returned: this wait is the kernel's.
	err = wait.PollUntilContextTimeout(ctx, pollInterval, vfNetdevWait, true, func(context.Context) (bool, error) {
		macs, _ := netMACs(s.Sysfs, vf.PCI)
		if len(macs) > 0 {
			vf.MAC = macs[0]
		}
		return vf.MAC != "", nil
	})
	if err != nil {
		if ctx.Err() == nil { // the wait's own bound, not the caller's
			err = fmt.Errorf("not done after %s", vfNetdevWait)
		}
		return vf, fmt.Errorf("bound to %s, but it registered no netdev: waiting for netdev of VF %s: %w", vf.Driver, vf.PCI, err)
	}
	if vf.Netdev, err = s.moveLink(ctx, "VF", vf.PCI, vf.MAC, target, nil); err != nil {
		return vf, fmt.Errorf("moving VF netdev into %s: %w", target, err)
	}
	return vf, nil
}

// probeVF has the kernel probe vf for its driver. While the PF's
// sriov_drivers_autoprobe is off the kernel probes a VF only if it has a
// driver_override (pci_device_can_probe in torvalds/linux
// drivers/pci/pci-driver.c@v6.1), and drivers_probe then binds nothing
// and still succeeds (measured in test/kernel/guest on 6.1 and 6.12). The
// VF driver's name is not known here, so autoprobe is on for this one
// probe; the OpAutoprobe entry restores the PF's own value on undo.
func (s *Session) probeVF(pf, vf string) error {
	autoprobe := s.Sysfs.Attr(pf, "sriov_drivers_autoprobe")
	if err := WriteFile(autoprobe, "1"); err != nil {
		return err
	}
	err := WriteFile(s.Sysfs.DriversProbe(), vf)
	return errors.Join(err, WriteFile(autoprobe, "0"))
}

// netdeviceDriverProblem says why vf, just probed, can never be a
// netdevice VF: no driver took it (drivers_probe succeeds when none
// matches), or it is on vfio-pci (a driver_override, e.g. set by driverctl
// or a udev rule, or an id added to vfio-pci's new_id), which registers no
// netdev.
func netdeviceDriverProblem(sys Sysfs, vf VF) error {
	override, _ := sys.ReadAttr(vf.PCI, "driver_override")
	if override == "(null)" {
		override = ""
	}
	switch vf.Driver {
	case "":
		vendor, _ := sys.ReadAttr(vf.PCI, "vendor")
		device, _ := sys.ReadAttr(vf.PCI, "device")
		found := "VF " + vendor + ":" + device
		if override != "" {
			found += fmt.Sprintf(", driver_override %q", override)
		}
		return fmt.Errorf("no driver bound after drivers_probe (%s): netdevice mode needs the NIC's kernel VF driver loaded (modprobe \"$(cat %s)\" finds it)",
			found, sys.Attr(vf.PCI, "modalias"))
	case config.VFDriverVFIO:
		return fmt.Errorf("bound to %s, which registers no netdev (driver_override %q, or the VF's id written to its new_id): netdevice mode needs the NIC's kernel VF driver",
			vf.Driver, override)
	}
	return nil
}

// unbind detaches bdf from driver (if any); the device is free when the
// write returns. Unbinding from vfio-pci blocks while the VF's group is
// held open (see Restorer.waitVFIOFree).
func unbind(sys Sysfs, bdf, driver string) error {
	if driver == "" {
		return nil
	}
	return WriteFile(sys.DriverFile(driver, "unbind"), bdf)
}
