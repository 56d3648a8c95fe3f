package sriov

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

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
			err = s.bindVFIO(ctx, pf.PCI, vf.PCI)
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

func (s *Session) bindVFIO(ctx context.Context, pf, vf string) error {
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
		if err := WriteFile(s.Sysfs.DriversProbe(), vf.PCI); err != nil {
			return vf, err
		}
	}
	if err := s.done(e); err != nil {
		return vf, err
	}
	if vf.Driver, err = s.Sysfs.Driver(vf.PCI); err != nil {
		return vf, err
	}
	if vf.Driver == "" {
		// drivers_probe succeeds when no driver matches, too.
		return vf, fmt.Errorf("no kernel driver took VF %s (is its VF driver loaded?)", vf.PCI)
	}
	// The VF driver registers the netdev from deferred work (iavf's
	// init task), after the probe returned: this wait is the kernel's.
	err = waitFor(ctx, "netdev of VF "+vf.PCI, func() (bool, error) {
		macs, _ := netMACs(s.Sysfs, vf.PCI)
		if len(macs) > 0 {
			vf.MAC = macs[0]
		}
		return vf.MAC != "", nil
	})
	if err != nil {
		return vf, err
	}
	if vf.Netdev, err = s.moveLink(ctx, "VF", vf.PCI, vf.MAC, target, nil); err != nil {
		return vf, fmt.Errorf("moving VF netdev into %s: %w", target, err)
	}
	return vf, nil
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
