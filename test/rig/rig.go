package rig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// DefaultPrefix names manual rigs' links (lrpf0, lrpf1, ...).
const DefaultPrefix = "lrpf"

// MaxPFs is bounded by the fake PCI buses 0x40..0x4f.
const MaxPFs = 16

// Options describe a rig.
type Options struct {
	// Dir holds everything the rig writes; it must be absolute.
	Dir string
	// PFs is the number of stand-in PFs.
	PFs int
	// Prefix names the PF links <prefix>0.. and the peer netns
	// <prefix>-peers; DefaultPrefix when empty.
	Prefix string
	// EmulatorCommand, when set, is started detached (own session, output
	// in DIR/emulator.log) unless a live emulator is recorded already. It
	// must write DIR/emulator.pid once running (`lane-rig emulate` does).
	EmulatorCommand []string
	// ImageMirror is the lane config's imageRegistryMirror: the registry
	// that serves the component images under their upstream names (make
	// test-env runs one and writes its address; testutil.RigImageMirror).
	// Empty leaves nodes pulling from the internet.
	ImageMirror string
	// VFDriver is the kernel driver the fake kernel binds the VFs to, and
	// so the NIC it stands in for (sysfs.NICForVFDriver): iavf, an Intel
	// X710 (the default when empty), or igbvf, an Intel 82576. Not the
	// lane's vfDriver (vfio-pci or netdevice): netdevice VFs stay on this
	// one.
	VFDriver string
}

func (o *Options) normalize() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("rig dir %q must be an absolute path", o.Dir)
	}
	if o.PFs < 1 || o.PFs > MaxPFs {
		return fmt.Errorf("rig PF count %d is outside 1..%d", o.PFs, MaxPFs)
	}
	nic, err := sysfs.NICForVFDriver(o.VFDriver)
	if err != nil {
		return fmt.Errorf("rig VF driver: %w", err)
	}
	o.VFDriver = nic.VFDriver
	// The longest name is a VF netdev: <prefix><pf>v<vf>, IFNAMSIZ-1 = 15.
	if l := len(o.Prefix) + len(strconv.Itoa(o.PFs-1)) + 2; l > 15 {
		return fmt.Errorf("rig prefix %q too long: VF netdev names would have %d characters (max 15)", o.Prefix, l)
	}
	if !prefixRE.MatchString(o.Prefix) {
		return fmt.Errorf("rig prefix %q: use letters, digits, '-', '_' and '.' (it names links and a netns)", o.Prefix)
	}
	return nil
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Up creates the rig described by opts, or completes one that exists with
// the same prefix and PF count. It returns the rig's state.
func Up(ctx context.Context, opts Options) (*State, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	dir := opts.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating rig dir: %w", err)
	}
	s, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	if s != nil && s.VFDriver == "" {
		s.VFDriver = sysfs.NICs[0].VFDriver // rig.json from before the option: the default NIC
	}
	if s != nil && (s.Prefix != opts.Prefix || len(s.PFs) != opts.PFs || s.VFDriver != opts.VFDriver) {
		return nil, fmt.Errorf("rig in %s has prefix %q, %d PFs and VF driver %s, asked for %q, %d and %s: run down first",
			dir, s.Prefix, len(s.PFs), s.VFDriver, opts.Prefix, opts.PFs, opts.VFDriver)
	}
	if s == nil {
		s = &State{
			Prefix:     opts.Prefix,
			PeersNetns: opts.Prefix + "-peers",
			SysfsRoot:  filepath.Join(dir, sysDir),
			VFIODir:    filepath.Join(dir, devDir, "vfio"),
			VFDriver:   opts.VFDriver,
		}
		s.ImageMirror = opts.ImageMirror
		for i := 0; i < opts.PFs; i++ {
			s.PFs = append(s.PFs, PFInfo{Name: opts.Prefix + strconv.Itoa(i), BDF: sysfs.PFBDF(i)})
		}
		// Record the names before touching the host: Down can then undo
		// a half-done Up.
		if err := writeState(dir, s); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := nsutil.Create(s.PeersNetns); err != nil {
		return nil, err
	}
	if err := ensurePFLinks(s); err != nil {
		return nil, err
	}
	// The fake sysfs and /dev/vfio are FUSE mounts served by the kernel
	// emulator (sysfs.Serve); Up makes their mount points.
	for _, d := range []string{s.SysfsRoot, s.VFIODir} {
		if err := os.MkdirAll(d, 0o755); err != nil && !sysfs.Mounted(d) {
			return nil, fmt.Errorf("creating mount point %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, laneStateDir), 0o755); err != nil {
		return nil, fmt.Errorf("creating lane state dir: %w", err)
	}
	if err := writeLaneConfig(dir, s); err != nil {
		return nil, err
	}
	// The detached emulator reads the PFs' MACs from rig.json: they must be
	// on disk before it starts (it maps netdevs to PCI functions by MAC).
	if err := writeState(dir, s); err != nil {
		return nil, err
	}
	if len(opts.EmulatorCommand) > 0 && !emulatorAlive(s.EmulatorPID) {
		pid, err := startEmulator(ctx, dir, opts.EmulatorCommand)
		if err != nil {
			return nil, err
		}
		s.EmulatorPID = pid
	}
	if err := writeState(dir, s); err != nil {
		return nil, err
	}
	return s, nil
}

// ensurePFLinks creates each PF veth unless its private end exists, in
// which case the PF exists too (maybe moved into a node) and keeps its MAC.
func ensurePFLinks(s *State) error {
	ns, err := netns.GetFromName(s.PeersNetns)
	if err != nil {
		return fmt.Errorf("opening netns %s: %w", s.PeersNetns, err)
	}
	defer ns.Close()
	peers, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in netns %s: %w", s.PeersNetns, err)
	}
	defer peers.Close()
	for i := range s.PFs {
		pf := &s.PFs[i]
		if _, err := peers.LinkByName(pf.Name); err == nil {
			if l, err := netlink.LinkByName(pf.Name); err == nil {
				pf.MAC = l.Attrs().HardwareAddr.String()
			}
			if pf.MAC == "" {
				return fmt.Errorf("stand-in PF %s exists but is neither in this netns nor recorded in rig state", pf.Name)
			}
			continue
		}
		if _, err := netlink.LinkByName(pf.Name); err == nil {
			return fmt.Errorf("creating stand-in PF %s: a link of that name exists and is not the rig's", pf.Name)
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: pf.Name},
			PeerName:      pf.Name,
			PeerNamespace: netlink.NsFd(int(ns)),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("creating stand-in PF %s (veth, peer in %s): %w", pf.Name, s.PeersNetns, err)
		}
		l, err := netlink.LinkByName(pf.Name)
		if err != nil {
			return fmt.Errorf("reading stand-in PF %s: %w", pf.Name, err)
		}
		pf.MAC = l.Attrs().HardwareAddr.String()
		// The peer up gives the PF carrier once the lane sets it up.
		if p, err := peers.LinkByName(pf.Name); err == nil {
			if err := peers.LinkSetUp(p); err != nil {
				return fmt.Errorf("setting up peer of stand-in PF %s: %w", pf.Name, err)
			}
		}
	}
	return nil
}

// ServeConfig is how the emulator serves this rig's fake sysfs and fake
// /dev/vfio; its PCI state persists in DIR/pci-state.json.
func (s *State) ServeConfig(dir string, l *log.Logger) sysfs.ServeConfig {
	pfs := make([]sysfs.PF, len(s.PFs))
	for i, pf := range s.PFs {
		pfs[i] = sysfs.PF{Name: pf.Name, MAC: pf.MAC}
	}
	return sysfs.ServeConfig{
		SysfsDir: s.SysfsRoot,
		VFIODir:  s.VFIODir,
		Owner:    s.Prefix,
		KernelConfig: sysfs.KernelConfig{
			PFs: pfs, VFDriver: s.VFDriver, PeerNetns: s.PeersNetns, StateFile: sysfs.StateFileIn(dir), Log: l,
		},
	}
}

// Down stops the emulator, deletes the rig's links and netns and removes
// the files Up wrote. A missing or half-made rig is not an error.
func Down(dir string) error {
	s, err := ReadState(dir)
	if err != nil {
		return err
	}
	var errs []error
	if s != nil {
		pid := s.EmulatorPID
		if p := readPIDFile(dir); p != 0 {
			pid = p
		}
		if err := stopEmulator(pid); err != nil {
			errs = append(errs, err)
		}
		// A server that died (or a test process killed mid-run) leaves
		// its mounts behind, dead: detach them before removing files.
		sysfs.Unmount(s.SysfsRoot)
		sysfs.Unmount(s.VFIODir)
		// Deleting the private ends destroys every PF and VF veth pair,
		// wherever the lane moved the other end.
		if err := nsutil.Delete(s.PeersNetns); err != nil {
			errs = append(errs, err)
		}
		for _, pf := range s.PFs {
			l, err := netlink.LinkByName(pf.Name)
			if err != nil || l.Type() != "veth" || (pf.MAC != "" && l.Attrs().HardwareAddr.String() != pf.MAC) {
				continue
			}
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("deleting stand-in PF %s: %w", pf.Name, err))
			}
		}
	}
	for _, name := range []string{sysDir, devDir, laneStateDir, LaneFile, LogFile, PIDFile, StateFile + ".tmp",
		filepath.Base(sysfs.StateFileIn(dir)), filepath.Base(sysfs.StateFileIn(dir)) + ".tmp"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("removing rig file: %w", err))
		}
	}
	if len(errs) > 0 {
		// Keep rig.json so a second Down can finish the job.
		return errors.Join(errs...)
	}
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing rig state: %w", err)
	}
	// The directory itself goes only if nothing else lives there, so the
	// error of a non-empty (or already gone) directory is expected.
	_ = os.Remove(dir)
	return nil
}
