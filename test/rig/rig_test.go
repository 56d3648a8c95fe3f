package rig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// emulatorBound is how long the tests give the emulator to make VFs. It
// answers in milliseconds, but under make test's load a 1 s bound measures
// the machine, not the emulator; the bound only says when to give up.
const emulatorBound = 10 * time.Second

// hostLinksWithPrefix lists host links whose name starts with prefix.
func hostLinksWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	links, err := nsutil.LinkList(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// assertGone checks that nothing of a rig is left on the host.
func assertGone(t *testing.T, dir, prefix string) {
	t.Helper()
	if l := hostLinksWithPrefix(t, prefix); len(l) > 0 {
		t.Errorf("links left after down: %v", l)
	}
	if nsutil.Exists(prefix + "-peers") {
		t.Errorf("netns %s-peers left after down", prefix)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("rig dir left after down (%v): %v", err, entries)
	}
}

func TestUpDownIdempotent(t *testing.T) {
	testutil.RequireRoot(t)
	const prefix = "rg-a"
	dir := filepath.Join(t.TempDir(), "rig")
	t.Cleanup(func() { _ = Down(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(time.Minute))
	defer cancel()

	start := time.Now()
	s1, err := Up(ctx, Options{Dir: dir, PFs: 3, Prefix: prefix, ImageMirror: "http://192.0.2.1:5055"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up took %v", time.Since(start))
	s2, err := Up(ctx, Options{Dir: dir, PFs: 3, Prefix: prefix})
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if _, err := Up(ctx, Options{Dir: dir, PFs: 2, Prefix: prefix}); err == nil {
		t.Error("up with another PF count over an existing rig succeeded")
	}
	if s1.VFDriver != sysfs.X710.VFDriver || s2.VFDriver != sysfs.X710.VFDriver {
		t.Errorf("default VF driver recorded as %q, %q; want %s", s1.VFDriver, s2.VFDriver, sysfs.X710.VFDriver)
	}
	// The fake kernel's state is one NIC's: another over it is refused.
	if _, err := Up(ctx, Options{Dir: dir, PFs: 3, Prefix: prefix, VFDriver: sysfs.I82576.VFDriver}); err == nil ||
		!strings.Contains(err.Error(), "VF driver iavf") || !strings.Contains(err.Error(), "igbvf") {
		t.Errorf("up with another VF driver over an existing rig: %v, want a refusal naming both", err)
	}
	if _, err := Up(ctx, Options{Dir: dir, PFs: 3, Prefix: prefix, VFDriver: "ixgbevf"}); err == nil {
		t.Error("up with a VF driver no known NIC has succeeded")
	}

	if got := hostLinksWithPrefix(t, prefix); len(got) != 3 {
		t.Fatalf("host links after two ups: %v, want exactly 3", got)
	}
	// The emulator serves the fake sysfs and /dev/vfio at the rig's paths.
	srv, err := sysfs.Serve(s2.ServeConfig(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for i, pf := range s2.PFs {
		if pf.MAC != s1.PFs[i].MAC {
			t.Errorf("PF %s MAC changed across ups: %s -> %s", pf.Name, s1.PFs[i].MAC, pf.MAC)
		}
		l, err := netlink.LinkByName(pf.Name)
		if err != nil {
			t.Fatalf("PF link %s: %v", pf.Name, err)
		}
		if l.Attrs().HardwareAddr.String() != pf.MAC {
			t.Errorf("PF %s link MAC %s != recorded %s", pf.Name, l.Attrs().HardwareAddr, pf.MAC)
		}
		tree := sysfs.Tree{Root: s2.SysfsRoot}
		addr, err := sysfs.ReadAttr(filepath.Join(tree.DeviceDir(pf.BDF), "net", pf.Name, "address"))
		if err != nil || addr != pf.MAC {
			t.Errorf("tree address of %s = %q (%v), want %s", pf.Name, addr, err, pf.MAC)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "dev", "vfio", "vfio")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("dev/vfio/vfio: %v", err)
	}

	// lane.yaml is a valid lane config pointing at the rig.
	b, err := os.ReadFile(filepath.Join(dir, LaneFile))
	if err != nil {
		t.Fatal(err)
	}
	var lane config.Lane
	if err := config.DecodeStrict(b, &lane); err != nil {
		t.Fatalf("lane.yaml does not decode strictly: %v\n%s", err, b)
	}
	config.SetDefaults(&lane)
	if err := config.Validate(&lane); err != nil {
		t.Fatalf("lane.yaml invalid: %v\n%s", err, b)
	}
	if lane.Name != "rig-"+prefix || lane.SysfsRoot != s2.SysfsRoot || lane.Agents != 3 || lane.PFsPerNode != 1 ||
		lane.RegistryEnabled() || lane.ImageRegistryMirror != "http://192.0.2.1:5055" || len(lane.PFs.Include) != 3 ||
		lane.K3sImage != testutil.StandinK3sImage || lane.ToolsImage != testutil.StandinToolsImage {
		t.Errorf("lane.yaml does not describe the rig:\n%s", b)
	}
	// The stand-ins' mount of the fake sysfs (test/standin/rigsysfs).
	if want := s2.SysfsRoot + ":" + rigsysfs.NodePath + "@agent:*"; !slices.Contains(lane.Volumes, want) {
		t.Errorf("lane.yaml volumes %v lack %s", lane.Volumes, want)
	}

	// A PF moved into a node's netns is still removed by Down.
	nodeNs := prefix + "-node"
	ns := nsutil.ForTest(t, nodeNs)
	l0, _ := netlink.LinkByName(s2.PFs[0].Name)
	if err := netlink.LinkSetNsFd(l0, int(ns)); err != nil {
		t.Fatal(err)
	}
	// Up while a PF is away keeps its recorded MAC and creates no twin.
	s3, err := Up(ctx, Options{Dir: dir, PFs: 3, Prefix: prefix})
	if err != nil {
		t.Fatalf("up with a PF moved away: %v", err)
	}
	if s3.PFs[0].MAC != s1.PFs[0].MAC {
		t.Errorf("moved PF MAC recorded as %s, want %s", s3.PFs[0].MAC, s1.PFs[0].MAC)
	}
	if got := hostLinksWithPrefix(t, prefix); len(got) != 2 {
		t.Errorf("host links with PF 0 away: %v, want 2", got)
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := Down(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("down took %v", time.Since(start))
	if err := Down(dir); err != nil {
		t.Fatalf("second down: %v", err)
	}
	inNode, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer inNode.Close()
	if _, err := inNode.LinkByName(s2.PFs[0].Name); err == nil {
		t.Errorf("PF moved into %s survived down", nodeNs)
	}
	assertGone(t, dir, prefix)
}

// On a rig whose NIC is not the default (WithVFDriver), VFs take that
// NIC's VF driver and still get their netdevs.
func TestNewForTestVFNetdevsAndCleanup(t *testing.T) {
	const prefix = "rg-b"
	nic := sysfs.I82576
	var dir string
	t.Run("rig", func(t *testing.T) {
		r := NewForTest(t, 2, prefix, WithVFDriver(nic.VFDriver))
		dir = r.Dir
		if s, err := ReadState(dir); err != nil || s.VFDriver != nic.VFDriver {
			t.Errorf("rig.json VF driver: %v (%v), want %s", s, err, nic.VFDriver)
		}
		pf := r.State.PFs[1]
		numvfs := filepath.Join(r.Tree.DeviceDir(pf.BDF), "sriov_numvfs")
		f, err := os.OpenFile(numvfs, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("2\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var e0, e1 error // the last look-ups' errors
		if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, bound.Scaled(emulatorBound), true, func(context.Context) (bool, error) {
			_, e0 = netlink.LinkByName(pf.Name + "v0")
			_, e1 = netlink.LinkByName(pf.Name + "v1")
			return e0 == nil && e1 == nil, nil
		}); err != nil {
			t.Fatalf("VF netdevs of %s not created within %s: %v %v", pf.Name, emulatorBound, e0, e1)
		}
		for j := range 2 {
			vf := sysfs.VFBDF(pf.BDF, j)
			if d := r.Tree.Driver(vf); d != nic.VFDriver {
				t.Errorf("VF %s on %q, want %s", vf, d, nic.VFDriver)
			}
			if id, _ := sysfs.ReadAttr(filepath.Join(r.Tree.DeviceDir(vf), "device")); id != nic.VFDevice {
				t.Errorf("VF %s device %q, want %s", vf, id, nic.VFDevice)
			}
		}
		if d := r.Tree.Driver(pf.BDF); d != nic.PFDriver {
			t.Errorf("PF %s on %q, want %s", pf.BDF, d, nic.PFDriver)
		}
		// Left with VFs on purpose: cleanup must remove them too.
	})
	assertGone(t, dir, prefix)
}

func TestLaneRigCLI(t *testing.T) {
	testutil.RequireRoot(t)
	const prefix = "rg-c"
	bin := filepath.Join(t.TempDir(), "lane-rig")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lane-rig")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building lane-rig: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "rig")
	t.Cleanup(func() { _ = Down(dir) })
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("lane-rig %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	start := time.Now()
	out := run("up", "--dir", dir, "--pfs", "2", "--prefix", prefix, "--vf-driver", "igbvf")
	t.Logf("lane-rig up took %v:\n%s", time.Since(start), out)
	if !strings.Contains(out, sysfs.I82576.Model) {
		t.Errorf("lane-rig up does not say which NIC the rig stands in for:\n%s", out)
	}
	s, err := ReadState(dir)
	if err != nil || s == nil {
		t.Fatalf("rig state after up: %v", err)
	}
	if !emulatorAlive(s.EmulatorPID) {
		t.Fatalf("emulator pid %d not running", s.EmulatorPID)
	}
	// The detached emulator plays the kernel.
	tree := sysfs.Tree{Root: s.SysfsRoot}
	if err := os.WriteFile(filepath.Join(tree.DeviceDir(s.PFs[0].BDF), "sriov_numvfs"), []byte("3\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, bound.Scaled(emulatorBound), true, func(context.Context) (bool, error) {
		return exists(filepath.Join(tree.DeviceDir(s.PFs[0].BDF), "virtfn2")), nil
	}); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, LogFile))
		t.Fatalf("detached emulator did not create VFs within %s; log:\n%s", emulatorBound, log)
	}
	if _, err := netlink.LinkByName(fmt.Sprintf("%sv2", s.PFs[0].Name)); err != nil {
		t.Errorf("VF netdev from detached emulator: %v", err)
	}
	// The detached emulator stands in for the NIC --vf-driver picked.
	if d := tree.Driver(sysfs.VFBDF(s.PFs[0].BDF, 2)); d != sysfs.I82576.VFDriver {
		t.Errorf("VF driver from detached emulator %q, want %s", d, sysfs.I82576.VFDriver)
	}
	// up again leaves the same emulator running; up for another NIC is
	// refused.
	if out, err := exec.Command(bin, "up", "--dir", dir, "--pfs", "2", "--prefix", prefix).CombinedOutput(); err == nil {
		t.Errorf("lane-rig up with the default VF driver over an igbvf rig succeeded:\n%s", out)
	}
	run("up", "--dir", dir, "--pfs", "2", "--prefix", prefix, "--vf-driver", "igbvf")
	if s2, _ := ReadState(dir); s2 == nil || s2.EmulatorPID != s.EmulatorPID {
		t.Errorf("second up replaced the emulator")
	}
	run("down", "--dir", dir)
	if emulatorAlive(s.EmulatorPID) {
		t.Errorf("emulator pid %d still running after down", s.EmulatorPID)
	}
	run("down", "--dir", dir)
	assertGone(t, dir, prefix)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }
