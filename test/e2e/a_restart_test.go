package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// TestRestartedLaneRepaired takes one lane through what a host does to it
// and repair brings it back from each: one agent container restarted (its
// PF stays in the old, pinned netns while the container runs in a new
// one: status degraded, exit 1; repair puts the PF back and restarts the
// device plugin), then a host "reboot" (rebootHost: every PF back in the
// host's netns, the VFs gone, every node started again and, with its
// datastore on a tmpfs, the default, the server on an empty datastore;
// status names repair for each PF; repair takes the PFs back, recreates
// the VFs and applies up's objects again with a new baseline; verify
// passes; a second repair has nothing to do), then the server restarted
// alone (the agents' kubelets registered with it before it lost its
// datastore: repair restarts them). Last, the repaired agent
// removed by hand (docker rm -f): its netns was pinned by repair, so down
// still brings both stand-ins home. Every node restarted at once, PFs left
// in their pinned netns, is TestDockerdRestartedLanesRepaired's, with the
// datastore on a tmpfs and on disk; test/apiserver and
// test/standin/k3drig have a server restart that keeps its data.
//
// One lane for all of it, not one each: every lane up is ~1.5 min of make
// test's 2 cores. And this file's name sorts early on purpose: go test
// starts the package's parallel tests in source order, files by name, at
// most -parallel at once, and this, the longest e2e test, started last
// from restart_test.go and ended last, past every other lane.
func TestRestartedLaneRepaired(t *testing.T) {
	parallelOnRig(t)
	_, r, l := rigLane(t, 2, nil)
	if !l.cfg.DatastoreOnTmpfs() {
		t.Fatal("the rig's lane keeps its datastore on disk: this test is of the default, a tmpfs")
	}
	l.up(t)
	t.Cleanup(func() { l.down(t) })
	if res := run(t, nil, "status", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "healthy") {
		t.Fatalf("status of a fresh lane: exit %d\n%s", res.code, res.output)
	}
	agent0 := "k3d-" + l.cfg.Name + "-agent-0"

	// One agent restarted.
	cli := docker(t)
	restarted := time.Now()
	if err := cli.ContainerRestart(t.Context(), agent0, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	// The device plugin finds its devices once, at start: let the one on
	// the restarted agent start again, with its PF still in the old netns,
	// before repair (on a busy host it did, and repair waited forever).
	waitDevicePluginStarted(t, kubernetes.NewForConfigOrDie(restConfig(t, l.cfg.KubeconfigPath())), agent0, restarted)
	res := run(t, nil, "status", "--config", l.path, "-o", "json")
	var st struct {
		Health   string   `json:"health"`
		Problems []string `json:"problems"`
	}
	if i := strings.Index(res.output, "{"); i >= 0 {
		_ = json.Unmarshal([]byte(res.output[i:strings.LastIndex(res.output, "}")+1]), &st)
	}
	if res.code != 1 || st.Health != "degraded" || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], agent0) || !strings.Contains(st.Problems[0], "repair") {
		t.Fatalf("status after the agent restarted: exit %d, %+v\n%s", res.code, st, res.output)
	}
	res = run(t, nil, "repair", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "repaired ("+agent0+")") || !strings.Contains(res.output, "✓ restart the device plugin (") || !strings.Contains(res.output, "wait for VFs") {
		t.Fatalf("repair of the restarted agent: exit %d\n%s", res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status after repairing the agent: exit %d\n%s", res.code, res.output)
	}

	// A host reboot then: the pins and the VFs are gone, the PFs are back
	// in the host's netns under their names, the nodes start again.
	nodes := []string{"k3d-" + l.cfg.Name + "-server-0", agent0, "k3d-" + l.cfg.Name + "-agent-1"}
	rebootHost(t, r, l, nodes)
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 1 || strings.Count(res.output, "nor in its pinned netns (after a host reboot it is back in the host's): run 'sriov-lane repair") != 2 {
		t.Fatalf("status after a reboot: exit %d, want 1 naming repair for both agents\n%s", res.code, res.output)
	}
	// repair takes each PF back from the host's netns, moves it into its
	// agent's new one, recreates the VFs and, the cluster being empty
	// again, applies up's objects.
	res = run(t, nil, "repair", "--config", l.path)
	if res.code != 0 || strings.Count(res.output, "✓ create VFs and bind drivers (") != 2 || !strings.Contains(res.output, "the cluster's objects") ||
		!strings.Contains(res.output, "✓ record baseline (") || !strings.Contains(res.output, "wait for VFs") {
		t.Fatalf("repair after a reboot: exit %d\n%s", res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status after repairing a reboot: exit %d\n%s", res.code, res.output)
	}
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Fatalf("verify after repairing a reboot: exit %d", res.code)
	}
	if res := run(t, nil, "repair", "--config", l.path); res.code != 0 || !strings.Contains(res.output, "nothing to repair") {
		t.Fatalf("second repair: exit %d\n%s", res.code, res.output)
	}
	// The server restarted alone (docker restart of one container): on its
	// tmpfs the cluster comes back empty, and both agents' kubelets, which
	// registered with it before and register only once, would never appear
	// in it. repair restarts them, then puts their PFs back and restores
	// the cluster.
	if err := cli.ContainerRestart(t.Context(), nodes[0], container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	res = statusOnceServerAnswers(t, l)
	if res.code != 1 || !strings.Contains(res.output, "the cluster came back empty") {
		t.Fatalf("status after the server restarted alone: exit %d, want 1 saying the cluster came back empty\n%s", res.code, res.output)
	}
	res = run(t, nil, "repair", "--config", l.path)
	for _, a := range nodes[1:] {
		if !strings.Contains(res.output, "✓ restart "+a+", registered with the server before it lost its datastore (") {
			t.Errorf("repair after the server restarted alone did not restart %s", a)
		}
	}
	if res.code != 0 || !strings.Contains(res.output, "the cluster's objects") || strings.Count(res.output, "✓ create VFs and bind drivers (") != 2 {
		t.Fatalf("repair after the server restarted alone: exit %d\n%s", res.code, res.output)
	}
	res = run(t, nil, "status", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "healthy") || strings.Count(res.output, "kubevirt.io/sriov_net=6") != 2 {
		t.Fatalf("status after repairing the server's restart: exit %d\n%s", res.code, res.output)
	}
	// The repaired agent removed by hand (docker rm -f): its netns was
	// pinned by repair, so its stand-in PF outlives the container and down
	// brings it back under its name, with the other one. RemoveVolumes: the
	// node image's anonymous volumes (/var/lib/kubelet, ...) go with it;
	// they are the test's doing, not the lane's.
	if err := cli.ContainerRemove(t.Context(), agent0, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	res = l.down(t)
	if res.code != 0 {
		t.Fatal("down after repair and docker rm -f failed")
	}
	if strings.Contains(res.output, "not found") {
		t.Errorf("down reports a lost PF although the netns was pinned:\n%s", res.output)
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
	h := testutil.HandleAt(t, pin)
	links, err := nsutil.LinkList(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, pf := range pfs {
		link := testutil.LinkWithMAC(links, pf.MAC)
		if link == nil {
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
