package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// Transcript is what one run of the scenario saw, step by step, with
// everything that legitimately differs between machines (PCI addresses,
// ifindex numbers, netdev names) replaced by labels: "pf0", "pf0.vf1", ...
type Transcript struct {
	Env   string `json:"env"`   // "real" or "fake"
	Where string `json:"where"` // uname -r on a real kernel; "fake" otherwise
	Steps []Step `json:"steps"`
}

// Step is one operation and what it left.
type Step struct {
	Name string   `json:"name"`
	Op   string   `json:"op"`
	Args []string `json:"args,omitempty"`
	// Result is "ok", the errno's name ("EBUSY"), "blocked" for a write
	// the kernel holds (runner.release) or one still pending after
	// writeBound, or "error: ..." for anything else.
	Result string `json:"result"`
	// State is what the step observes afterwards (see observe).
	State map[string]string `json:"state,omitempty"`
}

// PF is one physical function the scenario may use: in the home netns
// (the netns the scenario runs in), bound to its driver, with no VFs.
type PF struct {
	BDF  string
	Name string // its netdev
}

// Env is a machine the scenario runs on: a real kernel (Real) or the rig's
// fake (Fake).
type Env interface {
	Name() string  // "real" or "fake"
	Where() string // kernel release, or "fake"
	Sysfs() sriov.Sysfs
	VFIODir() string
	PFs() []PF // at least two
	// HoldDevice takes the VFIO device bdf of group as QEMU does
	// (container, type1 IOMMU, VFIO_GROUP_GET_DEVICE_FD).
	HoldDevice(group, bdf string) (DeviceHold, error)
	// DeviceRequests counts the times the kernel has logged, for VFIO
	// device bdf, that a release waits for the device's user with no
	// request channel to ask it through (deviceRequestLine). It is the
	// kernel's own word that a write is blocked rather than slow.
	DeviceRequests(bdf string) (int, error)
}

// deviceRequestLine is what vfio-pci logs, once, when a release of a device
// in use must wait for its user and the user registered no request
// eventfd: torvalds/linux drivers/vfio/pci/vfio_pci_core.c@v6.1
// vfio_pci_core_request (pci_warn, count 0), called from
// drivers/vfio/vfio_main.c@v6.1 vfio_unregister_group_dev only when the
// device's registrations did not drop to zero. The rig's fake logs the
// same line (test/rig/sysfs Kernel.waitDeviceReleased). A log line reads
// "vfio-pci <bdf>: " and this.
const deviceRequestLine = "No device request channel registered, blocked until released by user"

// DeviceHold is a held VFIO device.
type DeviceHold interface {
	CloseGroup() error // close the group and container fds, keep the device
	Close() error      // let the device go
}

// Bounds of the writes. No bound decides "blocked": a release is blocked
// when the kernel says so (Env.DeviceRequests), because a removal it does
// not block is only slow, and how slow depends on the host: ~3 s for an
// igb VF under TCG on an idle host, over 15 s beside a loaded CI run
// (6.12, niced, test/kernel/vm). writeBound is how long any write may take
// before the scenario gives up on it (VF creation on an emulated NIC under
// TCG takes seconds).
const (
	writeBound = 60 * time.Second
	// returnBound is how long a PF may take to come back to the home
	// netns once its netns died (cleanup_net runs from a workqueue).
	returnBound = 10 * time.Second
)

type runner struct {
	env   Env
	sys   sriov.Sysfs
	pfs   []PF
	home  netns.NsHandle
	h     *netlink.Handle
	tmp   string
	tr    *Transcript
	label map[int]string // ifindex -> label of the links the scenario knows
	orig  map[int]string // ifindex -> the link's name when first seen
	// pending are writes that returned "blocked", by step name.
	pending map[string]chan error
}

// Run runs the scenario on env and returns what it saw. An error is a
// failure of the scenario's own machinery (no netlink handle, too few PFs),
// not of a step: steps record their results.
func Run(ctx context.Context, env Env) (*Transcript, error) {
	pfs := env.PFs()
	if len(pfs) < 2 {
		return nil, fmt.Errorf("the scenario needs two PFs, %s has %d", env.Name(), len(pfs))
	}
	// The home netns is this thread's. Not /proc/self's: that is the main
	// thread's, and a goroutine that unshared a netns (nsutil.Create, the
	// netns steps) and exited locked may have left the main thread in
	// that netns; the runtime parks such a thread, but does not end it.
	runtime.LockOSThread()
	home, err := netns.Get()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("opening the home netns: %w", err)
	}
	defer home.Close()
	// Only NETLINK_ROUTE: a guest kernel may lack the other families a
	// handle opens by default (XFRM: EPROTONOSUPPORT on the tier's 6.12).
	h, err := netlink.NewHandleAt(home, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in the home netns: %w", err)
	}
	defer h.Close()
	tmp, err := os.MkdirTemp("", "sriov-lane-scenario-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	r := &runner{env: env, sys: env.Sysfs(), pfs: pfs, home: home, h: h, tmp: tmp,
		tr: &Transcript{Env: env.Name(), Where: env.Where()}, label: map[int]string{}, orig: map[int]string{},
		pending: map[string]chan error{}}
	for i, pf := range pfs[:2] {
		l, err := h.LinkByName(pf.Name)
		if err != nil {
			return nil, fmt.Errorf("PF %s (%s) in the home netns: %w", pf.BDF, pf.Name, err)
		}
		r.label[l.Attrs().Index] = fmt.Sprintf("pf%d", i)
		r.orig[l.Attrs().Index] = pf.Name
	}
	r.sriovSteps()
	r.vfioSteps()
	if err := r.netnsSteps(ctx); err != nil {
		return r.tr, err
	}
	return r.tr, nil
}

// pf0 is the PF the PCI steps use.
func (r *runner) pf0() string { return r.pfs[0].BDF }

// vf is the BDF of VF j of the PF at pf, "" when it has none.
func (r *runner) vf(pf string, j int) string {
	target, err := os.Readlink(r.sys.Attr(pf, "virtfn"+strconv.Itoa(j)))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// add records a step, observing the PCI state of pf0 after it.
func (r *runner) add(s Step) {
	if s.State == nil {
		s.State = map[string]string{}
	}
	for k, v := range r.pciState(r.pf0(), "pf0") {
		s.State[k] = v
	}
	r.tr.Steps = append(r.tr.Steps, s)
}

// result names an outcome.
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
	}
	return "error: " + err.Error()
}

// write stores value in path within writeBound; "blocked" leaves the
// write pending under the step's name (wait collects it).
func (r *runner) write(step, path, value string) string {
	done := make(chan error, 1)
	go func() { done <- sriov.WriteFile(path, value) }()
	select {
	case err := <-done:
		return result(err)
	case <-time.After(writeBound):
		r.pending[step] = done
		return "blocked"
	}
}

// release is a write that the kernel may hold until the user of VFIO
// device vf lets it go (a VF's removal, an unbind from vfio-pci): "blocked"
// once the kernel logged that it waits for that user with the write still
// pending, else the write's own result however long it takes within
// writeBound. A write still pending at writeBound with no such line is
// "pending, no device request logged": neither outcome the kernel gives.
func (r *runner) release(step, path, value, vf string) string {
	before, err := r.env.DeviceRequests(vf)
	if err != nil {
		return "error: reading the kernel's log: " + err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- sriov.WriteFile(path, value) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(writeBound)
	for {
		select {
		case err := <-done:
			return result(err)
		case <-tick.C:
			if n, err := r.env.DeviceRequests(vf); err == nil && n > before {
				r.pending[step] = done
				return "blocked"
			}
		case <-giveUp:
			r.pending[step] = done
			return "pending, no device request logged"
		}
	}
}

// wait is the outcome of the pending write of step, within writeBound.
func (r *runner) wait(step string) string {
	done, ok := r.pending[step]
	if !ok {
		return "error: no pending write"
	}
	delete(r.pending, step)
	select {
	case err := <-done:
		return result(err)
	case <-time.After(writeBound):
		return "blocked"
	}
}

// store is a step writing value to an attribute named by what, e.g.
// "pf0/sriov_numvfs" or "drivers/vfio-pci/bind pf0.vf0".
func (r *runner) store(name, what, path, value string) string {
	res := r.write(name, path, value)
	shown := value
	if strings.Contains(what, " pf0.") {
		shown = "<its address>" // the value is the BDF the args name
	}
	r.add(Step{Name: name, Op: "write", Args: []string{what, shown}, Result: res})
	return res
}

func (r *runner) numvfs(name, value string) string {
	return r.store(name, "pf0/sriov_numvfs", r.sys.Attr(r.pf0(), "sriov_numvfs"), value)
}

// pciState is what the steps observe of a PF: its SR-IOV attributes and
// each VF's driver, driver_override, netdev and VFIO group node.
func (r *runner) pciState(pf, label string) map[string]string {
	s := map[string]string{}
	read := func(key, attr string) {
		v, err := r.sys.ReadAttr(pf, attr)
		if err != nil {
			v = result(err)
		}
		s[label+"."+key] = v
	}
	read("totalvfs", "sriov_totalvfs")
	read("numvfs", "sriov_numvfs")
	read("autoprobe", "sriov_drivers_autoprobe")
	var vfs []string
	for j := 0; ; j++ {
		vf := r.vf(pf, j)
		if vf == "" {
			break
		}
		l := fmt.Sprintf("%s.vf%d", label, j)
		vfs = append(vfs, fmt.Sprintf("vf%d", j))
		d, err := r.sys.Driver(vf)
		if err != nil {
			d = result(err)
		}
		s[l+".driver"] = d
		o, err := r.sys.ReadAttr(vf, "driver_override")
		if err != nil {
			o = result(err)
		}
		s[l+".override"] = o
		s[l+".netdev"] = yesNo(len(r.vfNetdevs(vf)) > 0)
		s[l+".group"] = yesNo(r.groupNode(vf) != "")
	}
	s[label+".virtfns"] = strings.Join(vfs, " ")
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// vfNetdevs lists the netdevs sysfs shows under a VF (as the caller's
// netns sees them).
func (r *runner) vfNetdevs(vf string) []string {
	ents, err := os.ReadDir(r.sys.Attr(vf, "net"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// group is a function's IOMMU group, "" without one.
func (r *runner) group(bdf string) string {
	target, err := os.Readlink(r.sys.Attr(bdf, "iommu_group"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// groupNode is the VFIO group file of bdf when it exists.
func (r *runner) groupNode(bdf string) string {
	g := r.group(bdf)
	if g == "" {
		return ""
	}
	p := filepath.Join(r.env.VFIODir(), g)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func (r *runner) drv(driver, file string) string { return r.sys.DriverFile(driver, file) }

// sriovSteps: VF creation and its errnos, autoprobe, driver_override,
// drivers_probe, bind and unbind.
func (r *runner) sriovSteps() {
	pf := r.pf0()
	r.add(Step{Name: "fresh PF", Op: "observe", Result: "ok"})
	r.numvfs("numvfs 0 -> 2, autoprobe on", "2")
	r.numvfs("numvfs 2 -> 3", "3")
	total, _ := r.sys.ReadInt(pf, "sriov_totalvfs")
	r.numvfs("numvfs 2 -> totalvfs+1", strconv.Itoa(total+1))
	r.numvfs("numvfs 2 -> 2", "2")
	r.numvfs("numvfs 2 -> 0", "0")
	r.store("autoprobe off", "pf0/sriov_drivers_autoprobe", r.sys.Attr(pf, "sriov_drivers_autoprobe"), "0")
	r.numvfs("numvfs 0 -> 2, autoprobe off", "2")
	vf0, vf1 := r.vf(pf, 0), r.vf(pf, 1)
	vfDriver := r.vfDriver()
	r.store("override vf0 vfio-pci", "pf0.vf0/driver_override", r.sys.Attr(vf0, "driver_override"), "vfio-pci")
	r.store("drivers_probe vf0", "drivers_probe pf0.vf0", r.sys.DriversProbe(), vf0)
	r.store("bind of a bound vf0", "drivers/vfio-pci/bind pf0.vf0", r.drv("vfio-pci", "bind"), vf0)
	r.store("unbind vf0 from vfio-pci", "drivers/vfio-pci/unbind pf0.vf0", r.drv("vfio-pci", "unbind"), vf0)
	r.store("bind vf0 to vfio-pci", "drivers/vfio-pci/bind pf0.vf0", r.drv("vfio-pci", "bind"), vf0)
	r.store("bind vf1 to the VF driver", "drivers/<vf driver>/bind pf0.vf1", r.drv(vfDriver, "bind"), vf1)
	r.store("bind vf1 to vfio-pci without override", "drivers/vfio-pci/bind pf0.vf1", r.drv("vfio-pci", "bind"), vf1)
	r.store("unbind vf1 from the VF driver", "drivers/<vf driver>/unbind pf0.vf1", r.drv(vfDriver, "unbind"), vf1)
	r.store("clear override vf0", "pf0.vf0/driver_override", r.sys.Attr(vf0, "driver_override"), "")
	r.numvfs("numvfs 2 -> 0 with vfio-pci bound", "0")
}

// vfDriver is the driver the PF's VFs take from their id table: the one a
// probe of an unbound VF without an override binds. The PF's own driver
// names the NIC; the VF driver is read off a VF probed once.
func (r *runner) vfDriver() string {
	if d, err := r.sys.Driver(r.pf0()); err == nil {
		switch d {
		case "igb":
			return "igbvf"
		case "i40e":
			return "iavf"
		}
	}
	return "igbvf"
}

// bindVFIO puts vf0 of pf0 on vfio-pci (setup, not a step of its own).
func (r *runner) bindVFIO(vf string) error {
	if err := sriov.WriteFile(r.sys.Attr(vf, "driver_override"), "vfio-pci"); err != nil {
		return err
	}
	return sriov.WriteFile(r.sys.DriversProbe(), vf)
}

// vfioSteps: what blocks the removal of a vfio-pci VF.
func (r *runner) vfioSteps() {
	pf := r.pf0()
	setup := func(name string) (string, bool) {
		res := r.numvfs(name+": numvfs 0 -> 2", "2")
		vf0 := r.vf(pf, 0)
		if res != "ok" || vf0 == "" {
			return "", false
		}
		err := r.bindVFIO(vf0)
		r.add(Step{Name: name + ": vf0 to vfio-pci", Op: "override+drivers_probe", Args: []string{"pf0.vf0", "vfio-pci"}, Result: result(err)})
		return vf0, err == nil
	}

	// The group file open alone.
	if vf0, ok := setup("group open"); ok {
		g, err := os.OpenFile(filepath.Join(r.env.VFIODir(), r.group(vf0)), os.O_RDWR, 0)
		r.add(Step{Name: "group open: open /dev/vfio/<group>", Op: "open", Args: []string{"group of pf0.vf0"}, Result: result(err)})
		g2, err := os.OpenFile(filepath.Join(r.env.VFIODir(), r.group(vf0)), os.O_RDWR, 0)
		if g2 != nil {
			g2.Close()
		}
		r.add(Step{Name: "group open: a second open", Op: "open", Args: []string{"group of pf0.vf0"}, Result: result(err)})
		res := r.release("group open: numvfs 2 -> 0", r.sys.Attr(pf, "sriov_numvfs"), "0", vf0)
		if g != nil {
			g.Close()
		}
		if _, pending := r.pending["group open: numvfs 2 -> 0"]; pending {
			res += ", then " + r.wait("group open: numvfs 2 -> 0") + " once the group was closed"
		}
		r.add(Step{Name: "group open: numvfs 2 -> 0", Op: "write", Args: []string{"pf0/sriov_numvfs", "0"}, Result: res})
	}

	// A device fd, then the device fd alone (group and container closed),
	// each blocking sriov_numvfs=0; then a device fd blocking an unbind
	// from vfio-pci (the product's undo of a vfio-pci VF).
	for _, c := range []struct {
		name          string
		alone, unbind bool
	}{{"device held", false, false}, {"device fd alone", true, false}, {"device held, unbind", false, true}} {
		name, alone := c.name, c.alone
		vf0, ok := setup(name)
		if !ok {
			continue
		}
		hold, err := r.env.HoldDevice(r.group(vf0), vf0)
		r.add(Step{Name: name + ": hold the device", Op: "vfio-hold", Args: []string{"pf0.vf0", "container+type1+GET_DEVICE_FD"}, Result: result(err)})
		if err != nil {
			_ = sriov.WriteFile(r.sys.Attr(pf, "sriov_numvfs"), "0")
			continue
		}
		if alone {
			err := hold.CloseGroup()
			r.add(Step{Name: name + ": close group and container", Op: "close", Args: []string{"group", "container"}, Result: result(err)})
		}
		step, path, value, args := name+": numvfs 2 -> 0", r.sys.Attr(pf, "sriov_numvfs"), "0", []string{"pf0/sriov_numvfs", "0"}
		if c.unbind {
			step, path, value, args = name+": unbind vf0 from vfio-pci", r.drv("vfio-pci", "unbind"), vf0,
				[]string{"drivers/vfio-pci/unbind pf0.vf0", "<its address>"}
		}
		res := r.release(step, path, value, vf0)
		// No state while a write may be pending: a read of sriov_numvfs
		// waits for it (the PF's device lock).
		r.tr.Steps = append(r.tr.Steps, Step{Name: step, Op: "write", Args: args, Result: res})
		err = hold.Close()
		if _, pending := r.pending[step]; pending {
			res = r.wait(step)
		} else {
			res = "not pending"
		}
		r.add(Step{Name: name + ": let the device go", Op: "close", Args: []string{"device"}, Result: result(err),
			State: map[string]string{"pending write": res}})
		if c.unbind {
			r.numvfs(name+": numvfs 2 -> 0", "0")
		}
	}
}
