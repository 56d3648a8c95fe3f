package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// leftovers makes under s's names what a killed test leaves: a k3d node
// container, its network and image volume, a sleeper container named
// after the rig prefix, a stand-in PF pair with one end in the rig's
// named netns and one all in the host's, a lane's pinned netns (a bind mount) under dir, and a
// process listening on one of the slot's ports. It
// returns a check that reports which of them still exist, and registers
// their removal for the test's end.
func leftovers(t *testing.T, cli *client.Client, s *Slot, dir string) (left func() []string, listenerExited <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	lane, prefix := s.Lane(3), s.RigPrefix()
	node, sleeper := "k3d-"+lane+"-agent-0", prefix+"-sleeper-0"
	netName, volName := "k3d-"+lane, "k3d-"+lane+"-images"
	labels := map[string]string{k3dClusterLabel: lane}
	if _, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{Labels: labels}); err != nil {
		t.Fatalf("creating network %s: %v", netName, err)
	}
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: volName, Labels: labels}); err != nil {
		t.Fatalf("creating volume %s: %v", volName, err)
	}
	// Created, never started: the sweep removes a container in any state.
	for name, l := range map[string]map[string]string{node: labels, sleeper: nil} {
		if _, err := cli.ContainerCreate(ctx, &container.Config{Image: StandinPauseImage, Labels: l}, nil, nil, nil, name); err != nil {
			t.Fatalf("creating container %s: %v", name, err)
		}
	}
	// A stand-in PF whose private end is in the rig's named netns, and
	// one whose pair is all in the host's.
	peers := prefix + "-peers"
	if err := nsutil.Create(peers); err != nil {
		t.Fatal(err)
	}
	peersNS, err := netns.GetFromName(peers)
	if err != nil {
		t.Fatal(err)
	}
	defer peersNS.Close()
	pf, pfHost := prefix+"0", prefix+"1"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pf}, PeerName: pf + "p"}); err != nil {
		t.Fatalf("adding %s: %v", pf, err)
	}
	peer, err := netlink.LinkByName(pf + "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(peersNS)); err != nil {
		t.Fatalf("moving %sp into %s: %v", pf, peers, err)
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pfHost}, PeerName: pfHost + "p"}); err != nil {
		t.Fatalf("adding %s: %v", pfHost, err)
	}
	pin := filepath.Join(dir, "lanes", lane, "netns", "agent-0")
	if err := os.MkdirAll(filepath.Dir(pin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pin, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", pin, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("pinning %s: %v", pin, err)
	}
	// A process listening on a port of the slot, as a killed test's
	// kube-apiserver does.
	port := s.Port(t)
	nc := exec.Command("busybox", "nc", "-l", "-p", strconv.Itoa(port))
	if err := nc.Start(); err != nil {
		t.Fatalf("starting a listener on port %d: %v", port, err)
	}
	ncDone := make(chan struct{})
	go func() { _ = nc.Wait(); close(ncDone) }()
	t.Cleanup(func() { _ = nc.Process.Kill(); <-ncDone })
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, bound.Scaled(time.Minute), true, func(context.Context) (bool, error) {
		pids, err := listeners(s)
		return pids[nc.Process.Pid] != "", err
	}); err != nil {
		t.Fatalf("busybox nc never listened on port %d: %v", port, err)
	}
	left = func() []string {
		var out []string
		select {
		case <-ncDone:
		default:
			out = append(out, "process nc")
		}
		for _, c := range []string{node, sleeper} {
			if _, err := cli.ContainerInspect(ctx, c); !cerrdefs.IsNotFound(err) {
				out = append(out, "container "+c)
			}
		}
		if _, err := cli.NetworkInspect(ctx, netName, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
			out = append(out, "network "+netName)
		}
		if _, err := cli.VolumeInspect(ctx, volName); !cerrdefs.IsNotFound(err) {
			out = append(out, "volume "+volName)
		}
		if nsutil.Exists(peers) {
			out = append(out, "netns "+peers)
		}
		for _, l := range []string{pf, pfHost, pfHost + "p"} {
			if _, err := netlink.LinkByName(l); err == nil {
				out = append(out, "link "+l)
			}
		}
		ms, err := slotMounts([]string{lane}, prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			out = append(out, "mount "+m)
		}
		return out
	}
	t.Cleanup(func() {
		if _, err := sweepSlot(ctx, cli, s); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	return left, ncDone
}

// A slot's sweep removes what carries its names, and only that: another
// slot's leftovers stay, and so does everything of a slot a live test
// holds when all slots are swept.
func TestSweepRemovesOnlyTheSlotsOwn(t *testing.T) {
	RequireRoot(t)
	cli := RequireDockerClient(t)
	RequireImage(t, cli, StandinPauseImage)
	a, b := TakeSlot(t), TakeSlot(t)
	dir := t.TempDir()
	leftA, exitedA := leftovers(t, cli, a, dir)
	leftB, _ := leftovers(t, cli, b, dir)
	if got := leftA(); len(got) != 10 {
		t.Fatalf("made %d leftovers under slot %d, want 10: %v", len(got), a.n, got)
	}

	// a and b are held by this test: a sweep of every free slot leaves
	// them be.
	removed, err := Sweep(context.Background())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	for _, r := range removed {
		if strings.Contains(r, a.RigPrefix()) || strings.Contains(r, a.Lane(3)) || strings.Contains(r, b.RigPrefix()) || strings.Contains(r, b.Lane(3)) {
			t.Errorf("Sweep removed %s of a held slot", r)
		}
	}
	if got := leftA(); len(got) != 10 {
		t.Fatalf("after sweeping the free slots, slot %d has %d of its 10 leftovers: %v", a.n, len(got), got)
	}

	removed, err = sweepSlot(context.Background(), cli, a)
	if err != nil {
		t.Fatalf("sweeping slot %d: %v", a.n, err)
	}
	select { // SIGKILLed; reaped a moment later
	case <-exitedA:
	case <-time.After(bound.Scaled(time.Minute)):
		t.Errorf("the listener on slot %d's port outlived its sweep", a.n)
	}
	if got := leftA(); len(got) != 0 {
		t.Errorf("after its sweep, slot %d still has %v", a.n, got)
	}
	// The PF whose private end was in the netns went with it (gone, not
	// reported as a link); the rest is each reported.
	for _, want := range []string{"container k3d-" + a.Lane(3) + "-agent-0", "container " + a.RigPrefix() + "-sleeper-0",
		"network k3d-" + a.Lane(3), "volume k3d-" + a.Lane(3) + "-images", "netns " + a.RigPrefix() + "-peers", "link " + a.RigPrefix() + "1"} {
		if !slices.Contains(removed, want) {
			t.Errorf("sweep of slot %d did not report %q: %v", a.n, want, removed)
		}
	}
	if got := leftB(); len(got) != 10 {
		t.Errorf("slot %d's sweep touched slot %d: it has %d of its 10 leftovers: %v", a.n, b.n, len(got), got)
	}
}
