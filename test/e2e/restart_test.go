package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// TestEveryNodeRestartedLaneRepaired restarts every node container, as
// dockerd's restart does (restart policy unless-stopped). The PFs stay in
// the old, pinned netns; the server comes back with its CA and, with its
// datastore on a tmpfs (the default), on an empty datastore. status says
// what was lost, in words and JSON, and exits 1; repair moves the PFs back
// and, when the cluster came back empty, applies up's objects again and
// records a new baseline; status is healthy, verify passes. Then the host
// "reboots" (rebootHost): status names repair for each PF, repair brings
// the lane back once more, and down brings the stand-ins home. With the datastore on disk the cluster keeps
// its objects and only the PFs and VFs need repair: that case is not run
// here, to keep make test's e2e lanes within its time (each is ~1.5 min
// of the 2 cores); TestRestartedAgentDegradedThenRepaired has the PF-only
// repair, test/apiserver and test/standin/k3drig a server restart that
// keeps its data.
func TestEveryNodeRestartedLaneRepaired(t *testing.T) {
	t.Parallel() // own rig, lane names and API port (see TestMain)
	requireRig(t)
	s := testutil.TakeSlot(t)
	r := rig.NewForTest(t, 2, s.RigPrefix())
	l := newLane(t, r, s, 0)
	if !l.cfg.DatastoreOnTmpfs() {
		t.Fatal("the rig's lane keeps its datastore on disk: this test is of the default, a tmpfs")
	}
	l.up(t)
	t.Cleanup(func() { l.down(t) })
	cli := docker(t)
	nodes := []string{"k3d-" + l.cfg.Name + "-server-0", "k3d-" + l.cfg.Name + "-agent-0", "k3d-" + l.cfg.Name + "-agent-1"}
	for _, n := range nodes {
		if err := cli.ContainerRestart(t.Context(), n, container.StopOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Until the restarted server answers, status cannot tell whether the
	// cluster kept its objects.
	var res result
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		res = run(t, nil, "status", "--config", l.path, "-o", "json")
		if strings.Contains(res.output, `"ready": "`) || time.Now().After(deadline) {
			break
		}
	}
	if res.code != 1 || !strings.Contains(res.output, `"health": "degraded"`) || !strings.Contains(res.output, `"clusterLost": true`) ||
		!strings.Contains(res.output, "came back empty") ||
		!strings.Contains(res.output, "agent-0 restarted into a new network namespace") || !strings.Contains(res.output, "agent-1 restarted into a new network namespace") {
		t.Fatalf("status after every node restarted: exit %d, want 1 with the cluster lost\n%s", res.code, res.output)
	}
	res = run(t, nil, "repair", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "the cluster's objects") || !strings.Contains(res.output, "✓ deploy components (") ||
		!strings.Contains(res.output, "✓ record baseline (") || !strings.Contains(res.output, "wait for VFs") {
		t.Fatalf("repair: exit %d, want up's objects applied again\n%s", res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status after repair: exit %d\n%s", res.code, res.output)
	}
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Fatalf("verify after repair: exit %d", res.code)
	}
	if res := run(t, nil, "repair", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "nothing to repair") {
		t.Fatalf("second repair: exit %d\n%s", res.code, res.output)
	}
	// A host reboot then: the pins and the VFs are gone, the PFs are back
	// in the host's netns under their names, the nodes start again.
	rebootHost(t, r, l, nodes)
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 1 || strings.Count(res.output, "nor in its pinned netns (after a host reboot it is back in the host's): run 'sriov-lane repair") != 2 {
		t.Fatalf("status after a reboot: exit %d, want 1 naming repair for both agents\n%s", res.code, res.output)
	}
	// repair takes each PF back from the host's netns, moves it into its
	// agent's new one, recreates the VFs and, the cluster being empty
	// again, applies up's objects.
	res = run(t, nil, "repair", "--config", l.path)
	if res.code != 0 || strings.Count(res.output, "✓ create VFs and bind drivers (") != 2 || !strings.Contains(res.output, "the cluster's objects") {
		t.Fatalf("repair after a reboot: exit %d\n%s", res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status after repairing a reboot: exit %d\n%s", res.code, res.output)
	}
	if res := l.down(t); res.code != 0 {
		t.Fatal("down after a reboot and repair failed")
	}
	assertLaneGone(t, r, l, r.State.PFs)
}

// rebootHost does to the lane what a host reboot does: the node containers
// stop, every PF returns to the host's netns (a physical device is never
// destroyed with its netns; at boot its driver makes it there, under the
// name udev gives it, its original one), the VFs are gone (sriov_numvfs 0,
// autoprobe back on), the pins under the lane dir are no longer mounts
// (their files stay on disk), and dockerd starts the nodes again (restart
// policy unless-stopped).
func rebootHost(t *testing.T, r *rig.Rig, l *lane, nodes []string) {
	t.Helper()
	cli := docker(t)
	for _, n := range nodes {
		if err := cli.ContainerStop(t.Context(), n, container.StopOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	pins, err := filepath.Glob(l.cfg.Dir().Pin("*"))
	if err != nil || len(pins) == 0 {
		t.Fatalf("no pins under the lane dir (%v)", err)
	}
	for _, pin := range pins {
		returnPFsFrom(t, pin, host, r.State.PFs)
		if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil {
			t.Fatalf("unmounting pin %s: %v", pin, err)
		}
	}
	for _, pf := range r.State.PFs {
		dev := filepath.Join(r.State.SysfsRoot, "bus/pci/devices", pf.BDF)
		for attr, v := range map[string]string{"sriov_numvfs": "0", "sriov_drivers_autoprobe": "1"} {
			if err := os.WriteFile(filepath.Join(dev, attr), []byte(v), 0); err != nil {
				t.Fatalf("PF %s: writing %s: %v", pf.Name, attr, err)
			}
		}
	}
	for _, n := range nodes {
		if err := cli.ContainerStart(t.Context(), n, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// returnPFsFrom moves each of pfs found in the netns pinned at pin into
// host, down and under its original name.
func returnPFsFrom(t *testing.T, pin string, host netns.NsHandle, pfs []rig.PFInfo) {
	t.Helper()
	ns, err := netns.GetFromPath(pin)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := testutil.LinkList(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range links {
		for _, pf := range pfs {
			if !strings.EqualFold(link.Attrs().HardwareAddr.String(), pf.MAC) {
				continue
			}
			if err := h.LinkSetDown(link); err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetNsFd(link, int(host)); err != nil {
				t.Fatalf("moving PF %s out of %s: %v", pf.Name, pin, err)
			}
			back, err := netlink.LinkByName(link.Attrs().Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := netlink.LinkSetName(back, pf.Name); err != nil {
				t.Fatalf("renaming %s to %s: %v", link.Attrs().Name, pf.Name, err)
			}
		}
	}
}
