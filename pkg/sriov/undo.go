package sriov

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/containerns"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
)

// Restorer gives the host back what this package's journal records say
// was taken; its fields are what that takes (sysfs, Docker, VFIO, bounds).
// A fresh process builds it from the lane's configuration.
type Restorer struct {
	Sysfs  Sysfs
	Docker containerns.Inspector
	// Force returns PFs to the current netns even when it is not the one
	// they were taken from.
	Force bool
	// VFIODir holds the VFIO group devices (/dev/vfio); empty skips the
	// check for processes holding a VF's group before it is unbound.
	VFIODir string
	// HolderWait bounds the wait for those processes (DefaultHolderWait
	// when zero).
	HolderWait time.Duration
	// ProcRoot is where the holders are looked for ("" is /proc).
	ProcRoot string
	// BootID is the running boot's ID ("" reads the kernel's): records
	// made in another boot return PFs to the current netns.
	BootID string
}

// Undoers reverses every operation this package journals. Each undo is
// idempotent, copes with an intent that never took effect and succeeds
// with a note when its object is gone.
func Undoers(d Restorer) journal.Undoers {
	return journal.Undoers{
		OpLease:  journal.UndoRecord(undoLease),
		OpRename: journal.UndoRecord(d.undoRename),
		OpMove:   journal.UndoRecord(d.returnLink),
		OpPin:    journal.UndoRecord(undoPin),
		OpAutoprobe: journal.UndoRecord(func(_ context.Context, rec AutoprobeRecord) (string, error) {
			if !d.Sysfs.Exists(rec.PCI) {
				return fmt.Sprintf("PCI device %s is gone; autoprobe not restored", rec.PCI), nil
			}
			if err := WriteFile(d.Sysfs.Attr(rec.PCI, "sriov_drivers_autoprobe"), rec.Original); err != nil {
				return "", fmt.Errorf("restoring autoprobe of %s: %w", rec.PCI, err)
			}
			return d.probeOriginalVFs(rec)
		}),
		OpNumVFs: journal.UndoRecord(d.undoNumVFs),
		OpBind:   journal.UndoRecord(d.undoBind),
	}
}

func (d Restorer) undoNumVFs(ctx context.Context, rec NumVFsRecord) (string, error) {
	if !d.Sysfs.Exists(rec.PCI) {
		return fmt.Sprintf("PCI device %s is gone; no VFs to remove", rec.PCI), nil
	}
	cur, err := d.Sysfs.ReadInt(rec.PCI, "sriov_numvfs")
	if err != nil {
		return "", err
	}
	if cur != 0 {
		// Removing a VF whose VFIO group is open blocks like unbinding it.
		if err := d.waitVFsFree(ctx, rec.PCI); err != nil {
			return "", err
		}
		write := func() error { return setNumVFs(d.Sysfs, rec.PCI, 0) }
		if err := d.boundedVFIOWrite(ctx, vfsOf(d.Sysfs, rec.PCI), write); err != nil {
			return "", fmt.Errorf("removing VFs of %s: %w", rec.PCI, err)
		}
	}
	if rec.Original != 0 {
		if err := setNumVFs(d.Sysfs, rec.PCI, rec.Original); err != nil {
			return "", fmt.Errorf("restoring %d VFs on %s: %w", rec.Original, rec.PCI, err)
		}
		return "restored the " + strconv.Itoa(rec.Original) + " VFs the PF had before (freshly created)", nil
	}
	return "", nil
}

// undoBind frees a VF from the driver the lane bound. The original driver
// is not re-bound: the numvfs undo that follows removes the VF.
func (d Restorer) undoBind(ctx context.Context, rec BindRecord) (string, error) {
	if !d.Sysfs.Exists(rec.VF) {
		return fmt.Sprintf("VF %s is gone", rec.VF), nil
	}
	cur, err := d.Sysfs.Driver(rec.VF)
	if err != nil {
		return "", err
	}
	if cur != "" && cur != rec.Original && (cur == rec.Driver || rec.Driver == driverKernel) {
		if cur == config.VFDriverVFIO {
			if err := d.waitVFIOFree(ctx, rec.VF); err != nil {
				return "", err
			}
		}
		err := d.boundedVFIOWrite(ctx, []string{rec.VF}, func() error { return unbind(d.Sysfs, rec.VF, cur) })
		if err != nil && !errors.Is(err, ErrGroupHeld) {
			// An unbind left pending by an earlier, timed-out down may
			// have completed meanwhile: then there is nothing to do.
			if now, derr := d.Sysfs.Driver(rec.VF); derr == nil && now != cur {
				err = nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("unbinding VF %s from %s: %w", rec.VF, cur, err)
		}
	}
	ov, err := d.Sysfs.ReadAttr(rec.VF, "driver_override")
	if err != nil {
		return "", err
	}
	if ov != "" && ov != "(null)" {
		if err := WriteFile(d.Sysfs.Attr(rec.VF, "driver_override"), ""); err != nil {
			return "", err
		}
	}
	return "", nil
}

// probeOriginalVFs binds the VFs a PF had before the lane to their drivers
// again. The numvfs undo recreated them while autoprobe was still off (it
// is undone before the autoprobe it followed), so they came back with no
// driver; with autoprobe on again, a probe gives each the driver the
// kernel would have given it.
func (d Restorer) probeOriginalVFs(rec AutoprobeRecord) (string, error) {
	if strings.TrimSpace(rec.Original) != "1" {
		return "", nil
	}
	n := 0
	for _, vf := range vfsOf(d.Sysfs, rec.PCI) {
		if drv, err := d.Sysfs.Driver(vf); err != nil || drv != "" {
			continue
		}
		if err := WriteFile(d.Sysfs.DriversProbe(), vf); err != nil {
			return "", fmt.Errorf("probing VF %s of %s: %w", vf, rec.PCI, err)
		}
		n++
	}
	if n == 0 {
		return "", nil
	}
	return fmt.Sprintf("probed the %d VFs %s had before for their drivers", n, rec.PCI), nil
}

// VFDrivers counts pf's VFs by the driver they are bound to ("none" for
// none), for status and export.
func (s Sysfs) VFDrivers(pf string) map[string]int {
	out := map[string]int{}
	for _, vf := range s.ListVFs(pf) {
		out[vf.DriverOrNone()]++
	}
	return out
}

// vfsOf lists the PCI addresses of pf's VFs.
func vfsOf(sys Sysfs, pf string) []string {
	var out []string
	for _, vf := range sys.ListVFs(pf) {
		out = append(out, vf.PCI)
	}
	return out
}

// waitVFsFree waits until no VF of pf bound to vfio-pci is held open.
func (d Restorer) waitVFsFree(ctx context.Context, pf string) error {
	for _, vf := range vfsOf(d.Sysfs, pf) {
		if drv, err := d.Sysfs.Driver(vf); err == nil && drv == config.VFDriverVFIO {
			if err := d.waitVFIOFree(ctx, vf); err != nil {
				return err
			}
		}
	}
	return nil
}

// DefaultReturnWait is how long down waits for a physical PF to come back
// from a dead netns before reporting it missing: the kernel's netns
// cleanup hands devices back from a workqueue, which on a busy host lags
// by tens of seconds.
const DefaultReturnWait = 60 * time.Second

// returnPollInterval is how often down looks for the PF again: each look is
// one netlink dump of the init netns.
const returnPollInterval = 200 * time.Millisecond

// RemoveVFs takes every VF off the PF at pci, as down does: after their
// VFIO holders let go, within d's bound, naming them past it. A fleet
// host's PF that came back from a job with VFs is no device of the device
// plugin's pool until they are gone.
func (d Restorer) RemoveVFs(ctx context.Context, pci string) (string, error) {
	return d.undoNumVFs(ctx, NumVFsRecord{PCI: pci})
}
