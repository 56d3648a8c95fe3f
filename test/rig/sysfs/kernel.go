package sysfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kernel is the in-memory PCI state a FUSE-served fake sysfs (Serve)
// shows. Its stores behave like the kernel's sysfs stores: they take
// effect before write(2) returns, or fail it with the kernel's errno, and
// a store that would release a VF whose VFIO device is held open blocks
// until it is let go (see "VFIO" below). Sources (torvalds/linux, v6.x):
//
//   - drivers/pci/iov.c sriov_numvfs_store: kstrtou16 errors (EINVAL,
//     ERANGE on overflow), ERANGE above sriov_totalvfs, no-op when equal,
//     ENOENT without a PF driver, EBUSY nonzero -> other nonzero; both it
//     and sriov_numvfs_show hold the PF's device lock.
//   - drivers/base/bus.c bind_store / unbind_store: ENODEV for an unknown
//     device, a driver that does not match, or unbind from another driver;
//     drivers/base/dd.c __driver_probe_device: EBUSY when already bound.
//     drivers_probe_store: ENODEV for an unknown device, else success.
//     drivers/pci/pci-driver.c pci_device_can_probe: a VF takes a driver
//     only with its PF's sriov_drivers_autoprobe on or a driver_override.
//   - drivers/pci/pci-sysfs.c driver_override_show: "%s\n" of a NULL
//     pointer, "(null)"; drivers/base/driver.c driver_set_override: a
//     lone newline clears it, EINVAL at PAGE_SIZE.
//
// VFIO. What blocks a release is a VFIO *device* in use, not an open
// group file: torvalds/linux drivers/vfio/vfio_main.c@v6.1
// vfio_unregister_group_dev drops the device's registration
// (vfio_device_put_registration) and waits, asking the driver to let go
// every 10 s (vfio-pci: "No device request channel registered, blocked
// until released by user" once, or "Relaying device request to user"),
// for the last registration to go; VFIO_GROUP_GET_DEVICE_FD
// (vfio_group_get_device_fd, same file at v6.1; drivers/vfio/group.c from
// v6.2) takes one for the life of the device fd it returns, and
// vfio_device_fops_release gives it back. The group file takes none: a
// process holding only /dev/vfio/<group> open does not block an unbind or
// sriov_numvfs=0 (measured on 6.1 and 6.12, field notes section 2), and
// the group node goes with its last device, open or not. A second open of
// a group is EBUSY (vfio_group_fops_open, group->opened_file).
//
// A FUSE server cannot put a new file descriptor into the caller (the
// device fd is an anonymous inode the kernel makes), so the fake models
// the device fd by the open group file that asked for it: the fake group
// file answers the VFIO ioctls a user makes on the way (FUSE passes them
// through: they are _IO numbers, no data to copy), and
// VFIO_GROUP_GET_DEVICE_FD, after VFIO_GROUP_SET_CONTAINER, marks that
// open file as holding the device and returns 0 instead of a new fd. The
// device is held until that open file's last close (FUSE release), so a
// user keeps a dup of the group fd as its "device fd" and may close the
// original and the container (HoldDevice does this). The differences
// that remain: the holder's /proc/PID/fd shows the fake group file, not
// anon_inode:[vfio-device], and the group cannot be opened again while
// the device is held (on a real kernel it can, once the group fd is
// closed).
//
// A Kernel stands in for one NIC model (KernelConfig.VFDriver picks it):
// its PF and VF device ids and the drivers that bind them.
//
// A Kernel persists its state to StateFile after every change, so a
// restarted server carries on where the last one stopped.
type Kernel struct {
	cfg KernelConfig
	nic NIC
	log *log.Logger
	net *vfNetdevs

	mu     sync.Mutex
	fns    map[string]*function
	groups map[int]int // open count of each fake /dev/vfio/<group>
	// groupGen counts each group's comings and goings: an open file of a
	// group that went since does not count against opens of the new one.
	groupGen map[int]int
	devices  map[int]int   // device fds held through each group (VFIO_GROUP_GET_DEVICE_FD)
	changed  chan struct{} // closed and replaced when a device is let go or the kernel stops
	closed   bool
	vfioMod  uint32 // mode bits of the fake /dev/vfio/vfio

	// relayEvery is the interval of the "Relaying device request" log
	// line; 10 s like the kernel, shorter in tests.
	relayEvery time.Duration
}

// KernelConfig describes the hardware a Kernel stands in for.
type KernelConfig struct {
	PFs []PF
	// VFDriver is the kernel driver of the NIC's VFs, which picks the NIC
	// (NICForVFDriver): "igbvf" for an Intel 82576; empty for the
	// default, an X710 with iavf.
	VFDriver string
	// PeerNetns is the named netns holding the private ends of VF
	// netdevs; empty disables VF netdevs.
	PeerNetns string
	// StateFile, when set, is loaded at start and rewritten on change.
	StateFile string
	Log       *log.Logger
}

// function is one PCI function.
type function struct {
	fnState
	// lock is device_lock(): held across a store on the device.
	lock sync.Mutex
}

// fnState is a function's state, persisted and shown.
type fnState struct {
	BDF      string  `json:"bdf"`
	PF       string  `json:"pf,omitempty"` // physfn, VFs only
	Index    int     `json:"index"`
	Device   string  `json:"device"`
	Driver   string  `json:"driver,omitempty"`
	Override *string `json:"override,omitempty"`
	// PFs only.
	TotalVFs  int  `json:"totalVFs,omitempty"`
	NumVFs    int  `json:"numVFs,omitempty"`
	Autoprobe bool `json:"autoprobe,omitempty"`
	// The netdev the function's network driver registers: its name at
	// creation and its MAC, by which the caller's netns view finds it.
	NetName string `json:"netName,omitempty"`
	MAC     string `json:"mac,omitempty"`
}

func (f *fnState) isPF() bool { return f.PF == "" }

// NewKernel returns the PCI state for cfg.PFs, or the state StateFile
// recorded for them.
func NewKernel(cfg KernelConfig) (*Kernel, error) {
	nic, err := NICForVFDriver(cfg.VFDriver)
	if err != nil {
		return nil, err
	}
	l := cfg.Log
	if l == nil {
		l = log.New(io.Discard, "", 0)
	}
	k := &Kernel{cfg: cfg, nic: nic, log: l, fns: map[string]*function{}, groups: map[int]int{}, groupGen: map[int]int{},
		devices: map[int]int{}, changed: make(chan struct{}), vfioMod: 0o600, relayEvery: 10 * time.Second}
	for i, pf := range cfg.PFs {
		k.fns[PFBDF(i)] = k.newPF(PFBDF(i), pf)
	}
	if cfg.StateFile != "" {
		if err := k.load(); err != nil {
			return nil, err
		}
	}
	if cfg.PeerNetns != "" {
		n, err := openVFNetdevs(cfg.PeerNetns)
		if err != nil {
			return nil, err
		}
		k.net = n
	}
	return k, nil
}

// newPF is a PF as the machine starts with it: bound to its driver, no
// VFs, autoprobe on (the kernel's default, sriov_drivers_autoprobe).
func (k *Kernel) newPF(bdf string, pf PF) *function {
	return &function{fnState: fnState{BDF: bdf, Device: k.nic.PFDevice, Driver: k.nic.PFDriver, TotalVFs: k.nic.TotalVFs,
		Autoprobe: true, NetName: pf.Name, MAC: strings.ToLower(pf.MAC)}}
}

// AddPF adds a PF after the start, at the next PFBDF, and returns its
// address: a hot-added device, whose sysfs files appear and which its
// matching driver (the PF driver) takes at once (pci_bus_add_device:
// pci_create_sysfs_dev_files, then device_attach; torvalds/linux
// drivers/pci/bus.c@01b944f).
// A mounted tree shows it on the next lookup: nothing is cached. It lets a
// test mount the fake sysfs before the containers that bind-mount it start
// and give it a PF only once it knows the MAC of one of their links.
func (k *Kernel) AddPF(pf PF) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, f := range k.fns {
		if f.isPF() {
			n++
		}
	}
	bdf := PFBDF(n)
	k.fns[bdf] = k.newPF(bdf, pf)
	k.saveLocked()
	k.log.Printf("%s: PF %s added", bdf, pf.Name)
	return bdf
}

type savedState struct {
	Functions []*function `json:"functions"`
	VFIOMode  uint32      `json:"vfioMode"`
}

func (k *Kernel) load() error {
	b, err := os.ReadFile(k.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading fake PCI state: %w", err)
	}
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding fake PCI state %s: %w", k.cfg.StateFile, err)
	}
	for _, f := range s.Functions {
		if f.isPF() && k.fns[f.BDF] == nil {
			continue // a PF this rig no longer has
		}
		want := k.nic.PFDevice
		if !f.isPF() {
			want = k.nic.VFDevice
		}
		if f.Device != want {
			return fmt.Errorf("fake PCI state %s: %s is device %s where the %s this kernel stands in for has %s: the state is another NIC's",
				k.cfg.StateFile, f.BDF, f.Device, k.nic.Model, want)
		}
		k.fns[f.BDF] = f
	}
	if s.VFIOMode != 0 {
		k.vfioMod = s.VFIOMode
	}
	return nil
}

// saveLocked writes the state; k.mu is held.
func (k *Kernel) saveLocked() {
	if k.cfg.StateFile == "" {
		return
	}
	s := savedState{VFIOMode: k.vfioMod}
	for _, bdf := range k.sortedLocked() {
		s.Functions = append(s.Functions, k.fns[bdf])
	}
	b, err := json.MarshalIndent(s, "", " ")
	if err == nil {
		tmp := k.cfg.StateFile + ".tmp"
		if err = os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, k.cfg.StateFile)
		}
	}
	if err != nil {
		k.log.Printf("saving fake PCI state: %v", err)
	}
}

// Close releases every blocked store (they fail with ENODEV) and the VF
// netdev handles. VF netdevs themselves stay: they belong to the rig.
func (k *Kernel) Close() {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.changed)
	}
	k.mu.Unlock()
	if k.net != nil {
		k.net.Close()
	}
}

func (k *Kernel) sortedLocked() []string {
	out := make([]string, 0, len(k.fns))
	for bdf := range k.fns {
		out = append(out, bdf)
	}
	sort.Strings(out)
	return out
}

// fn returns the function at bdf, nil if absent.
func (k *Kernel) fn(bdf string) *function {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fns[bdf]
}

// snapshot is a consistent copy of every function, for views.
func (k *Kernel) snapshot() map[string]fnState {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]fnState, len(k.fns))
	for bdf, f := range k.fns {
		out[bdf] = f.fnState
	}
	return out
}

// sysfsStr is the kernel's sysfs_streq-style argument: trailing newline
// dropped.
func sysfsStr(b []byte) string { return strings.TrimSuffix(string(b), "\n") }

// StoreNumVFs is a write to sriov_numvfs of the PF at bdf.
func (k *Kernel) StoreNumVFs(bdf string, buf []byte) syscall.Errno {
	arg := sysfsStr(buf)
	if strings.ContainsAny(arg, "_ \t\n") || strings.HasPrefix(arg, "0b") || strings.HasPrefix(arg, "0o") {
		return syscall.EINVAL // kstrtou16 knows only 0x and 0 prefixes
	}
	n, err := strconv.ParseUint(arg, 0, 16)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return syscall.ERANGE
		}
		return syscall.EINVAL
	}
	pf := k.fn(bdf)
	if pf == nil || !pf.isPF() {
		return syscall.ENOENT
	}
	if int(n) > pf.TotalVFs {
		return syscall.ERANGE
	}
	pf.lock.Lock()
	defer pf.lock.Unlock()
	k.mu.Lock()
	cur, driver := pf.NumVFs, pf.Driver
	k.mu.Unlock()
	switch {
	case int(n) == cur:
		return 0
	case driver == "":
		k.log.Printf("%s: no driver bound to device; cannot configure SR-IOV (ENOENT)", bdf)
		return syscall.ENOENT
	case n == 0:
		return k.disableVFs(pf)
	case cur != 0:
		k.log.Printf("%s: %d VFs already enabled. Disable before enabling %d VFs (EBUSY)", bdf, cur, n)
		return syscall.EBUSY
	}
	return k.enableVFs(pf, int(n))
}

// ShowNumVFs is a read of sriov_numvfs. It takes the device lock, so it
// waits for a store in progress (sriov_numvfs_show, since "PCI/IOV:
// Serialize sysfs sriov_numvfs reads vs writes", v5.5).
func (k *Kernel) ShowNumVFs(bdf string) int {
	pf := k.fn(bdf)
	if pf == nil {
		return 0
	}
	pf.lock.Lock()
	defer pf.lock.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	return pf.NumVFs
}

// enableVFs adds n VFs; pf.lock is held.
func (k *Kernel) enableVFs(pf *function, n int) syscall.Errno {
	k.mu.Lock()
	autoprobe := pf.Autoprobe
	var vfs []*function
	for j := 0; j < n; j++ {
		vf := &function{fnState: fnState{BDF: VFBDF(pf.BDF, j), PF: pf.BDF, Index: j, Device: k.nic.VFDevice}}
		k.fns[vf.BDF] = vf
		vfs = append(vfs, vf)
	}
	pf.NumVFs = n
	k.saveLocked()
	k.mu.Unlock()
	k.log.Printf("%s: %d VFs enabled", pf.BDF, n)
	if autoprobe {
		for _, vf := range vfs {
			vf.lock.Lock()
			_ = k.probeLocked(vf)
			vf.lock.Unlock()
		}
	}
	return 0
}

// disableVFs removes every VF, last first, releasing drivers (which may
// block on an open VFIO group); pf.lock is held.
func (k *Kernel) disableVFs(pf *function) syscall.Errno {
	k.mu.Lock()
	n := pf.NumVFs
	k.mu.Unlock()
	for j := n - 1; j >= 0; j-- {
		vf := k.fn(VFBDF(pf.BDF, j))
		if vf == nil {
			continue
		}
		vf.lock.Lock()
		if errno := k.releaseLocked(vf); errno != 0 {
			vf.lock.Unlock()
			return errno
		}
		k.mu.Lock()
		delete(k.fns, vf.BDF)
		pf.NumVFs = j
		k.saveLocked()
		k.mu.Unlock()
		vf.lock.Unlock()
	}
	k.log.Printf("%s: VFs disabled", pf.BDF)
	return 0
}

// driverMatches is the PCI core's match: driver_override wins, else the
// driver's id table.
func (k *Kernel) driverMatches(driver string, f *fnState) bool {
	if f.Override != nil {
		return *f.Override == driver
	}
	for _, id := range k.nic.driverIDs(driver) {
		if id == f.Device {
			return true
		}
	}
	return false
}

// onWrittenFn runs op, under the function's lock, on the function whose
// address a write to a driver file (bind, unbind, drivers_probe) names:
// ENODEV when there is none.
func (k *Kernel) onWrittenFn(buf []byte, op func(f *function) syscall.Errno) syscall.Errno {
	f := k.fn(sysfsStr(buf))
	if f == nil {
		return syscall.ENODEV
	}
	f.lock.Lock()
	defer f.lock.Unlock()
	return op(f)
}

// StoreBind is a write to bus/pci/drivers/<driver>/bind.
func (k *Kernel) StoreBind(driver string, buf []byte) syscall.Errno {
	return k.onWrittenFn(buf, func(f *function) syscall.Errno {
		k.mu.Lock()
		match, cur := k.driverMatches(driver, &f.fnState), f.Driver
		k.mu.Unlock()
		if !match {
			return syscall.ENODEV
		}
		if cur != "" {
			return syscall.EBUSY
		}
		if !k.canProbe(f) {
			return syscall.ENODEV
		}
		return k.attachLocked(driver, f)
	})
}

// canProbe is pci_device_can_probe (torvalds/linux
// drivers/pci/pci-driver.c@v6.1, called by pci_device_probe): a VF whose
// PF has sriov_drivers_autoprobe off takes no driver, by a bind
// (ENODEV) or a probe (none binds), unless its driver_override is set.
// Measured on 6.1 and 6.12 (test/kernel scenario: "bind vf1 to the VF
// driver" with autoprobe off is ENODEV).
func (k *Kernel) canProbe(f *function) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f.isPF() || f.Override != nil {
		return true
	}
	pf := k.fns[f.PF]
	return pf == nil || pf.Autoprobe
}

// StoreUnbind is a write to bus/pci/drivers/<driver>/unbind.
func (k *Kernel) StoreUnbind(driver string, buf []byte) syscall.Errno {
	return k.onWrittenFn(buf, func(f *function) syscall.Errno {
		k.mu.Lock()
		cur := f.Driver
		k.mu.Unlock()
		if cur != driver {
			return syscall.ENODEV
		}
		return k.releaseLocked(f)
	})
}

// StoreDriversProbe is a write to bus/pci/drivers_probe.
func (k *Kernel) StoreDriversProbe(buf []byte) syscall.Errno {
	return k.onWrittenFn(buf, k.probeLocked)
}

// probeLocked binds the first matching driver to an unbound function; no
// match is not an error (device_attach returns 0).
func (k *Kernel) probeLocked(f *function) syscall.Errno {
	k.mu.Lock()
	bound := f.Driver != ""
	var driver string
	for _, d := range k.nic.drivers() {
		if k.driverMatches(d, &f.fnState) {
			driver = d
			break
		}
	}
	k.mu.Unlock()
	if bound || driver == "" || !k.canProbe(f) {
		return 0
	}
	return k.attachLocked(driver, f)
}

// attachLocked binds driver to f (f.lock held) with its side effects: a
// VF netdev for the VF driver, a VFIO group node for vfio-pci.
func (k *Kernel) attachLocked(driver string, f *function) syscall.Errno {
	if driver == k.nic.VFDriver && k.net != nil {
		if err := k.addVFNetdev(f); err != nil {
			// The bind still happens; the netdev is a best-effort extra.
			k.log.Printf("VF %s: netdev: %v", f.BDF, err)
		}
	}
	k.mu.Lock()
	f.Driver = driver
	k.saveLocked()
	k.mu.Unlock()
	k.log.Printf("%s: bound to %s", f.BDF, driver)
	return 0
}

// releaseLocked unbinds f's driver (f.lock held). A vfio-pci device held
// through a device fd blocks here until that is let go, as
// vfio_unregister_group_dev does; an open group alone does not. A PF
// driver takes its VFs with it.
func (k *Kernel) releaseLocked(f *function) syscall.Errno {
	k.mu.Lock()
	driver := f.Driver
	k.mu.Unlock()
	switch driver {
	case "":
		return 0
	case DriverVFIO:
		if errno := k.waitDeviceReleased(f); errno != 0 {
			return errno
		}
	case k.nic.VFDriver:
		if k.net != nil && f.NetName != "" {
			if err := k.net.remove(f.NetName); err != nil {
				k.log.Printf("VF %s: removing netdev: %v", f.BDF, err)
			}
		}
	case k.nic.PFDriver:
		// The PF driver's remove frees the VFs first (i40e_remove;
		// igb_remove's igb_disable_sriov, torvalds/linux
		// drivers/net/ethernet/intel/igb/igb_main.c@6f23fc4).
		if errno := k.disableVFs(f); errno != 0 {
			return errno
		}
	}
	k.mu.Lock()
	f.Driver = ""
	if !f.isPF() {
		f.NetName, f.MAC = "", ""
	}
	if g, err := iommuGroup(f.BDF); err == nil && driver == DriverVFIO && !k.groupExistsLocked(g) {
		// The group goes with its last vfio-pci device, open or not; a
		// bind makes a new one, which opens even while a file of the old
		// one is still open (opened_file is the old group's: torvalds/linux
		// drivers/vfio/group.c@v6.12 vfio_device_remove_group takes a
		// group whose last driver went off vfio.group_list, and
		// vfio_group_find_or_alloc, there and in vfio_main.c@v6.1, makes
		// a new one for the next device bound).
		delete(k.groups, g)
		k.groupGen[g]++
	}
	k.saveLocked()
	k.mu.Unlock()
	k.log.Printf("%s: unbound from %s", f.BDF, driver)
	return 0
}

// waitDeviceReleased blocks while f's device is held (a device fd
// obtained through its group), logging what vfio-pci logs: the request
// once, then (the fake's own line) every relayEvery while it waits.
func (k *Kernel) waitDeviceReleased(f *function) syscall.Errno {
	group, err := iommuGroup(f.BDF)
	if err != nil {
		return syscall.EINVAL
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for count := 0; k.devices[group] > 0; count++ {
		if k.closed {
			return syscall.ENODEV
		}
		if count == 0 {
			k.log.Printf("vfio-pci %s: No device request channel registered, blocked until released by user", f.BDF)
		}
		ch := k.changed
		k.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(k.relayEvery):
			k.log.Printf("vfio-pci %s: device still in use (#%d)", f.BDF, count+1)
		}
		k.mu.Lock()
	}
	return 0
}

// StoreOverride is a write to driver_override.
func (k *Kernel) StoreOverride(bdf string, buf []byte) syscall.Errno {
	if len(buf) >= 4096-1 {
		return syscall.EINVAL
	}
	f := k.fn(bdf)
	if f == nil {
		return syscall.ENODEV
	}
	v := string(buf)
	if i := strings.IndexByte(v, '\n'); i >= 0 {
		v = v[:i]
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v == "" {
		f.Override = nil
	} else {
		f.Override = &v
	}
	k.saveLocked()
	return 0
}

// StoreAutoprobe is a write to sriov_drivers_autoprobe (kstrtobool).
func (k *Kernel) StoreAutoprobe(bdf string, buf []byte) syscall.Errno {
	var v bool
	s := sysfsStr(buf)
	if s == "" {
		return syscall.EINVAL
	}
	switch s[0] {
	case '1', 'y', 'Y':
		v = true
	case '0', 'n', 'N':
	case 'o', 'O':
		if len(s) < 2 {
			return syscall.EINVAL
		}
		switch s[1] {
		case 'n', 'N':
			v = true
		case 'f', 'F':
		default:
			return syscall.EINVAL
		}
	default:
		return syscall.EINVAL
	}
	f := k.fn(bdf)
	if f == nil {
		return syscall.ENODEV
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	f.Autoprobe = v
	k.saveLocked()
	return 0
}

// OpenGroup opens the fake /dev/vfio/<group>: ENOENT without a device
// bound to vfio-pci in it, EBUSY when open already.
// gen is the group's generation, for CloseGroup.
func (k *Kernel) OpenGroup(group int) (gen int, errno syscall.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.groupExistsLocked(group) {
		return 0, syscall.ENOENT
	}
	if k.groups[group] > 0 {
		return 0, syscall.EBUSY
	}
	k.groups[group]++
	return k.groupGen[group], 0
}

// CloseGroup is the release of an OpenGroup of generation gen; devices is
// how many device fds that open file held (GetDevice), which are let go
// with it. The release of a group that went since changes nothing: a
// held device kept it from going.
func (k *Kernel) CloseGroup(group, gen, devices int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.groupGen[group] {
		return
	}
	if k.groups[group] > 0 {
		k.groups[group]--
	}
	if k.groups[group] == 0 {
		delete(k.groups, group)
	}
	k.devices[group] -= devices
	if k.devices[group] <= 0 {
		delete(k.devices, group)
	}
	if !k.closed {
		close(k.changed)
		k.changed = make(chan struct{})
	}
}

// GetDevice is VFIO_GROUP_GET_DEVICE_FD on an open group: the device of
// the group is held until CloseGroup lets it go. ENODEV when the group
// has no device bound to vfio-pci any more (vfio_device_get_from_name
// finds none).
func (k *Kernel) GetDevice(group int) syscall.Errno {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.groupExistsLocked(group) {
		return syscall.ENODEV
	}
	k.devices[group]++
	return 0
}

// GroupOpen reports whether a process holds the group open.
func (k *Kernel) GroupOpen(group int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.groups[group] > 0
}

// DeviceHeld reports whether a device fd of the group is held.
func (k *Kernel) DeviceHeld(group int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.devices[group] > 0
}

func (k *Kernel) groupExistsLocked(group int) bool {
	for _, f := range k.fns {
		if g, err := iommuGroup(f.BDF); err == nil && g == group && f.Driver == DriverVFIO {
			return true
		}
	}
	return false
}

// vfioGroups lists the groups that have a device bound to vfio-pci.
func (k *Kernel) vfioGroups() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int
	for _, f := range k.fns {
		if f.Driver == DriverVFIO {
			if g, err := iommuGroup(f.BDF); err == nil {
				out = append(out, g)
			}
		}
	}
	sort.Ints(out)
	return out
}

// addVFNetdev gives a VF bound to the VF driver a netdev named <pf>v<j>.
func (k *Kernel) addVFNetdev(vf *function) error {
	k.mu.Lock()
	pf := k.fns[vf.PF]
	var pfName string
	if pf != nil {
		pfName = pf.NetName
	}
	k.mu.Unlock()
	if pfName == "" {
		return fmt.Errorf("PF %s has no netdev name", vf.PF)
	}
	name := fmt.Sprintf("%sv%d", pfName, vf.Index)
	if len(name) > 15 {
		return fmt.Errorf("VF netdev name %q exceeds 15 characters", name)
	}
	mac, err := k.net.add(name)
	if err != nil {
		return err
	}
	k.mu.Lock()
	vf.NetName, vf.MAC = name, strings.ToLower(mac)
	k.mu.Unlock()
	return nil
}

// ServeConfig says where Serve mounts the fake sysfs and fake /dev/vfio.
type ServeConfig struct {
	KernelConfig
	// SysfsDir is the mount point of the fake sysfs.
	SysfsDir string
	// VFIODir, when set, is the mount point of the fake /dev/vfio: the
	// container device `vfio` and one file per group with a device bound
	// to vfio-pci, whose opens Kernel counts.
	VFIODir string
	// Owner, when set, heads the mounts' source in mountinfo
	// (<Owner>-sysfs, <Owner>-vfio): a rig's prefix, by which
	// testutil.Sweep finds the mounts of a rig whose server died with its
	// test.
	Owner string
}

func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// StateFileIn is where a rig keeps the fake PCI state next to the mount.
func StateFileIn(dir string) string { return filepath.Join(dir, "pci-state.json") }
