package sysfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EmulatorConfig says where the emulator works.
type EmulatorConfig struct {
	// Root is the fake sysfs root.
	Root string
	// VFIODir, when set, gets a <group> file per device bound to vfio-pci,
	// like the kernel's /dev/vfio/<group> character devices.
	VFIODir string
	// PeerNetns is the named netns (in /var/run/netns) holding the private
	// ends of VF netdevs. Empty disables VF netdevs.
	PeerNetns string
	// Log receives one line per handled write; nil discards.
	Log *log.Logger
	// Ready, if set, is called once the emulator watches the tree and has
	// handled the writes made before it started.
	Ready func()
}

// Emulator plays the kernel for a fake sysfs tree. All of its state lives
// in the tree and in the peer netns, so it can be restarted at any time.
type Emulator struct {
	cfg  EmulatorConfig
	tree Tree
	log  *log.Logger
	net  *vfNetdevs
}

// NewEmulator returns an emulator for cfg; Run starts it.
func NewEmulator(cfg EmulatorConfig) *Emulator {
	l := cfg.Log
	if l == nil {
		l = log.New(discard{}, "", 0)
	}
	return &Emulator{cfg: cfg, tree: Tree{Root: cfg.Root}, log: l}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// pollFallback is the scan interval when inotify is unavailable;
// safetyScan catches anything inotify missed (e.g. a watch added late).
const (
	pollFallback = 20 * time.Millisecond
	safetyScan   = 500 * time.Millisecond
)

// Run reacts to writes in the tree until ctx ends.
func (e *Emulator) Run(ctx context.Context) error {
	if _, err := os.Stat(e.tree.devicesDir()); err != nil {
		return fmt.Errorf("emulator root %s is not a fake sysfs tree: %w", e.cfg.Root, err)
	}
	if e.cfg.PeerNetns != "" {
		n, err := openVFNetdevs(e.cfg.PeerNetns)
		if err != nil {
			return err
		}
		defer n.Close()
		e.net = n
	}
	kick := make(chan struct{}, 1)
	interval := safetyScan
	w, err := newWatcher(kick)
	if err != nil {
		e.log.Printf("inotify unavailable, polling every %v: %v", pollFallback, err)
		interval = pollFallback
	} else {
		defer w.Close()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	ready := e.cfg.Ready
	for {
		if w != nil {
			w.watchDirs(e.watchedDirs())
		}
		e.reconcile()
		if ready != nil {
			ready()
			ready = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// Sync handles every pending write once, synchronously. Tests that need a
// tree in a given state (and no root) use it instead of Run.
func (e *Emulator) Sync() { e.reconcile() }

// watchedDirs lists every directory holding a control file.
func (e *Emulator) watchedDirs() []string {
	dirs := []string{filepath.Dir(e.tree.DriversProbe())}
	for _, d := range drivers {
		dirs = append(dirs, e.tree.DriverDir(d))
	}
	devs, _ := e.devices()
	for _, bdf := range devs {
		dirs = append(dirs, e.tree.DeviceDir(bdf))
	}
	return dirs
}

func (e *Emulator) devices() ([]string, error) {
	entries, err := os.ReadDir(e.tree.devicesDir())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, en := range entries {
		if en.IsDir() {
			out = append(out, en.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// reconcile handles every pending write. Order mirrors what a sequence of
// synchronous kernel writes would have produced: VF creation first, then
// unbinds before binds, then probes.
func (e *Emulator) reconcile() {
	devs, err := e.devices()
	if err != nil {
		e.log.Printf("listing devices: %v", err)
		return
	}
	for _, bdf := range devs {
		if _, err := os.Stat(filepath.Join(e.tree.DeviceDir(bdf), "sriov_totalvfs")); err == nil {
			if err := e.reconcileNumVFs(bdf); err != nil {
				e.log.Printf("PF %s: %v", bdf, err)
			}
		}
	}
	for _, d := range drivers {
		e.oneShot(filepath.Join(e.tree.DriverDir(d), "unbind"), func(bdf string) error { return e.unbind(d, bdf) })
	}
	for _, d := range drivers {
		e.oneShot(filepath.Join(e.tree.DriverDir(d), "bind"), func(bdf string) error { return e.bind(d, bdf) })
	}
	e.oneShot(e.tree.DriversProbe(), e.probe)
}

// oneShot feeds each line of a control file to handle, then truncates it.
func (e *Emulator) oneShot(path string, handle func(bdf string) error) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return
	}
	if err := os.Truncate(path, 0); err != nil {
		e.log.Printf("truncating %s: %v", path, err)
	}
	for _, line := range strings.Fields(string(b)) {
		if err := handle(line); err != nil {
			e.log.Printf("%s %s: %v", path, line, err)
		} else {
			e.log.Printf("%s %s: done", path, line)
		}
	}
}

func (e *Emulator) virtfns(pfBDF string) ([]string, error) {
	entries, err := os.ReadDir(e.tree.DeviceDir(pfBDF))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), "virtfn") {
			out = append(out, en.Name())
		}
	}
	return out, nil
}

func (e *Emulator) reconcileNumVFs(pfBDF string) error {
	numPath := filepath.Join(e.tree.DeviceDir(pfBDF), "sriov_numvfs")
	raw, err := ReadAttr(numPath)
	if err != nil {
		return err
	}
	if raw == "" {
		return nil // a writer is between truncate and write
	}
	cur, err := e.virtfns(pfBDF)
	if err != nil {
		return err
	}
	want, perr := strconv.Atoi(raw)
	switch {
	case perr == nil && want == len(cur):
		return nil
	case perr == nil && want == 0:
		e.log.Printf("PF %s: removing %d VFs", pfBDF, len(cur))
		return e.removeVFs(pfBDF)
	case perr == nil && len(cur) == 0 && want > 0 && want <= TotalVFs:
		e.log.Printf("PF %s: creating %d VFs", pfBDF, want)
		if err := e.createVFs(pfBDF, want); err != nil {
			// Leave no half-made VFs: the kernel's write fails as a whole.
			_ = e.removeVFs(pfBDF)
			_ = writeAttr(numPath, "0", false)
			return err
		}
		return nil
	}
	// EBUSY (VFs exist), ERANGE or EINVAL: the kernel keeps the old count.
	e.log.Printf("PF %s: rejecting sriov_numvfs=%q with %d VFs present", pfBDF, raw, len(cur))
	return writeAttr(numPath, strconv.Itoa(len(cur)), false)
}

func (e *Emulator) createVFs(pfBDF string, n int) error {
	autoprobe, _ := ReadAttr(filepath.Join(e.tree.DeviceDir(pfBDF), "sriov_drivers_autoprobe"))
	for j := 0; j < n; j++ {
		vf := VFBDF(pfBDF, j)
		if err := e.tree.addFunction(vf, DeviceVF, nil); err != nil {
			return fmt.Errorf("creating VF %s: %w", vf, err)
		}
		if err := ensureSymlink(filepath.Join("..", pfBDF), filepath.Join(e.tree.DeviceDir(vf), "physfn")); err != nil {
			return err
		}
		if autoprobe == "1" {
			if err := e.bind(DriverVF, vf); err != nil {
				return fmt.Errorf("autoprobing VF %s: %w", vf, err)
			}
		}
	}
	// virtfn links last: waiters treat them as "VFs are ready", as the
	// kernel's write returns only after VFs are added and probed.
	for j := 0; j < n; j++ {
		if err := ensureSymlink(filepath.Join("..", VFBDF(pfBDF, j)),
			filepath.Join(e.tree.DeviceDir(pfBDF), fmt.Sprintf("virtfn%d", j))); err != nil {
			return err
		}
	}
	return nil
}

func (e *Emulator) removeVFs(pfBDF string) error {
	var errs []error
	for j := 0; j < TotalVFs; j++ {
		vf := VFBDF(pfBDF, j)
		if _, err := os.Lstat(e.tree.DeviceDir(vf)); errors.Is(err, fs.ErrNotExist) {
			_ = os.Remove(filepath.Join(e.tree.DeviceDir(pfBDF), fmt.Sprintf("virtfn%d", j)))
			continue
		}
		if d := e.tree.Driver(vf); d != "" {
			if err := e.unbind(d, vf); err != nil {
				errs = append(errs, err)
			}
		}
		if err := e.tree.removeFunction(vf); err != nil {
			errs = append(errs, err)
		}
		if err := os.Remove(filepath.Join(e.tree.DeviceDir(pfBDF), fmt.Sprintf("virtfn%d", j))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// matches is the PCI core's driver match: driver_override wins, else the
// driver's id table.
func (e *Emulator) matches(driver, bdf string) bool {
	dir := e.tree.DeviceDir(bdf)
	if override, _ := ReadAttr(filepath.Join(dir, "driver_override")); override != "" && override != "(null)" {
		return override == driver
	}
	dev, _ := ReadAttr(filepath.Join(dir, "device"))
	for _, id := range driverIDs(driver) {
		if id == dev {
			return true
		}
	}
	return false
}

func (e *Emulator) bind(driver, bdf string) error {
	if _, err := os.Stat(e.tree.DeviceDir(bdf)); err != nil {
		return fmt.Errorf("no such device (ENODEV): %w", err)
	}
	if cur := e.tree.Driver(bdf); cur != "" {
		return fmt.Errorf("already bound to %s (EBUSY)", cur)
	}
	if !e.matches(driver, bdf) {
		return fmt.Errorf("%s does not match driver %s (ENODEV)", bdf, driver)
	}
	switch driver {
	case DriverVF:
		if err := e.addVFNetdev(bdf); err != nil {
			// The bind still happens; the netdev is a best-effort extra.
			e.log.Printf("VF %s: netdev: %v", bdf, err)
		}
	case DriverVFIO:
		if err := e.vfioNode(bdf, true); err != nil {
			return err
		}
	}
	return e.tree.bindLinks(bdf, driver)
}

func (e *Emulator) unbind(driver, bdf string) error {
	if cur := e.tree.Driver(bdf); cur != driver {
		return fmt.Errorf("not bound to %s (bound to %q; ENODEV)", driver, cur)
	}
	// Side effects first, driver links last: waiters treat the driver
	// link as the sign that the (synchronous, in the kernel) unbind is over.
	var errs []error
	switch driver {
	case DriverVF:
		errs = append(errs, e.removeVFNetdev(bdf))
	case DriverVFIO:
		errs = append(errs, e.vfioNode(bdf, false))
	}
	for _, p := range []string{filepath.Join(e.tree.DriverDir(driver), bdf), filepath.Join(e.tree.DeviceDir(bdf), "driver")} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Emulator) probe(bdf string) error {
	dir := e.tree.DeviceDir(bdf)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no such device: %w", err)
	}
	if e.tree.Driver(bdf) != "" {
		return nil
	}
	for _, d := range drivers {
		if e.matches(d, bdf) {
			return e.bind(d, bdf)
		}
	}
	return fmt.Errorf("no driver matches %s", bdf)
}

// vfioNode creates or removes VFIODir/<group>, the stand-in of the group's
// character device.
func (e *Emulator) vfioNode(bdf string, create bool) error {
	if e.cfg.VFIODir == "" {
		return nil
	}
	group, err := iommuGroup(bdf)
	if err != nil {
		return err
	}
	p := filepath.Join(e.cfg.VFIODir, strconv.Itoa(group))
	if create {
		return ensureFile(p, "")
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// addVFNetdev gives a VF bound to iavf a netdev named <pf>v<j>.
func (e *Emulator) addVFNetdev(vfBDF string) error {
	if e.net == nil {
		return nil
	}
	name, err := e.vfNetdevName(vfBDF)
	if err != nil {
		return err
	}
	mac, err := e.net.add(name)
	if err != nil {
		return err
	}
	return e.tree.addNet(vfBDF, name, mac)
}

func (e *Emulator) removeVFNetdev(vfBDF string) error {
	netDir := filepath.Join(e.tree.DeviceDir(vfBDF), "net")
	entries, _ := os.ReadDir(netDir)
	var errs []error
	errs = append(errs, os.RemoveAll(netDir))
	for _, en := range entries {
		if e.net != nil {
			errs = append(errs, e.net.remove(en.Name()))
		}
	}
	return errors.Join(errs...)
}

// vfNetdevName is <pf netdev name>v<function>, the PF name being the one
// recorded in the tree at rig creation.
func (e *Emulator) vfNetdevName(vfBDF string) (string, error) {
	pfBDF, err := os.Readlink(filepath.Join(e.tree.DeviceDir(vfBDF), "physfn"))
	if err != nil {
		// physfn is created after autoprobe only if we got the order
		// wrong; derive it instead of failing.
		pfBDF = vfBDF[:len("0000:40")] + ":00.0"
	}
	pfBDF = filepath.Base(pfBDF)
	entries, err := os.ReadDir(filepath.Join(e.tree.DeviceDir(pfBDF), "net"))
	if err != nil || len(entries) == 0 {
		return "", fmt.Errorf("PF %s has no netdev in the tree", pfBDF)
	}
	name := fmt.Sprintf("%sv%s", entries[0].Name(), vfBDF[strings.LastIndex(vfBDF, ".")+1:])
	if len(name) > 15 {
		return "", fmt.Errorf("VF netdev name %q exceeds 15 characters", name)
	}
	return name, nil
}
