package testutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// Sweep removes what killed test runs left under the names of every slot
// no live test holds, and returns what it removed. A slot's names are its
// own (TakeSlot), so whatever carries them while nobody holds the slot's
// lock is a dead holder's: a run SIGKILLed mid-test, or a test whose
// cleanup failed and kept its slot (Slot.Keep) until its process ended.
// What it looks for, each by the slot's names:
//   - Docker, and rootful Podman where its socket is: the k3d clusters of
//     its lanes (containers by k3d's cluster label or node names, their
//     networks and volumes), and containers named after its rig prefix
//     (pkg/sriov's sleepers);
//   - the host's mounts: the pinned netns of its lanes
//     (<state dir>/lanes/<lane>/netns/<agent>) and its rig's FUSE sysfs and
//     /dev/vfio;
//   - the kernel: its rig's links in the init netns and its named netns;
//   - processes listening on its ports (a killed test's control plane).
//
// Each slot is held while it is swept, so no test takes it meanwhile.
// Docker must answer: make test sweeps before and after its tiers, with
// dockerd running.
func Sweep(ctx context.Context) ([]string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	var engines []*client.Client
	if podman, err := podmanIfThere(); err != nil {
		return nil, err
	} else if podman != nil {
		defer podman.Close()
		engines = append(engines, podman)
	}
	var removed []string
	var errs []error
	for n := range slots {
		f, err := openLockFile(strconv.Itoa(n))
		if err != nil {
			return removed, fmt.Errorf("sweeping test slots: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // a live test's
			}
			return removed, fmt.Errorf("sweeping test slot %d: %w", n, err)
		}
		r, err := sweepSlot(ctx, cli, &Slot{n: n}, engines...)
		f.Close()
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, fmt.Errorf("test slot %d: %w", n, err))
		}
	}
	return removed, errors.Join(errs...)
}

// Sweep removes what carries s's names, as Sweep does for a dead
// holder's slot: a test's cleanup of what a failed create may have left
// (on cli's engine and on engines).
func (s *Slot) Sweep(ctx context.Context, cli *client.Client, engines ...*client.Client) ([]string, error) {
	return sweepSlot(ctx, cli, s, engines...)
}

// sweepEngine removes the containers, networks and volumes of one engine
// whose names or k3d cluster labels are the slot's (lanes, ofSlot).
func sweepEngine(ctx context.Context, cli *client.Client, lanes []string, ofSlot func(string) bool) ([]string, error) {
	var removed []string
	var errs []error
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return removed, fmt.Errorf("listing containers at %s: %w", cli.DaemonHost(), err)
	}
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if !slices.Contains(lanes, c.Labels[k3dClusterLabel]) && !ofSlot(name) {
			continue
		}
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", name, err))
			continue
		}
		removed = append(removed, "container "+name)
	}
	nets, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing networks: %w", err))
	}
	for _, n := range nets {
		if !slices.Contains(lanes, n.Labels[k3dClusterLabel]) && !ofSlot(n.Name) {
			continue
		}
		if err := cli.NetworkRemove(ctx, n.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing network %s: %w", n.Name, err))
			continue
		}
		removed = append(removed, "network "+n.Name)
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing volumes: %w", err))
	}
	for _, v := range vols.Volumes {
		if !slices.Contains(lanes, v.Labels[k3dClusterLabel]) && !ofSlot(v.Name) {
			continue
		}
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil {
			errs = append(errs, fmt.Errorf("removing volume %s: %w", v.Name, err))
			continue
		}
		removed = append(removed, "volume "+v.Name)
	}

	return removed, errors.Join(errs...)
}

// sweepSlot removes what carries s's names, mounts first (a pin keeps a
// netns alive), then containers (they hold networks and volumes), then
// networks, volumes and links.
func sweepSlot(ctx context.Context, cli *client.Client, s *Slot, engines ...*client.Client) ([]string, error) {
	var removed []string
	var errs []error
	lanes := make([]string, 10)
	for i := range lanes {
		lanes[i] = s.Lane(i)
	}
	prefix := s.RigPrefix()
	ofSlot := func(name string) bool {
		for _, l := range lanes {
			// k3d's names and the lane's registry (<lane>-registry).
			if name == "k3d-"+l || strings.HasPrefix(name, "k3d-"+l+"-") || strings.HasPrefix(name, l+"-") {
				return true
			}
		}
		return strings.HasPrefix(name, prefix+"-")
	}

	mounts, err := slotMounts(lanes, prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			continue
		}
		removed = append(removed, "mount "+m)
	}

	for _, c := range append([]*client.Client{cli}, engines...) {
		r, err := sweepEngine(ctx, c, lanes, ofSlot)
		removed = append(removed, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}

	// The rig's named netns hold the private ends of its veths: deleting
	// them as rig.Down does (nsutil.Delete, links first) deletes those
	// pairs at once, wherever the other end is.
	entries, err := os.ReadDir(nsutil.Path(""))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix+"-") {
			continue
		}
		if err := nsutil.Delete(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "netns "+e.Name())
	}
	// A control plane of a killed test (test/apiserver: kube-apiserver and
	// etcd in process groups of their own) outlives it on the slot's
	// ports. Docker's own proxies are left to Docker: they went with the
	// containers above.
	pids, err := listeners(s)
	if err != nil {
		errs = append(errs, err)
	}
	for pid, comm := range pids {
		if comm == "docker-proxy" || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("killing %s (pid %d) on a port of the slot: %w", comm, pid, err))
			continue
		}
		removed = append(removed, fmt.Sprintf("process %s (pid %d)", comm, pid))
	}

	links, err := nsutil.LinkList(nil)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		// The prefix is two letters and two base-36 digits, so the PF
		// and VF names of another slot never begin with it.
		name := l.Attrs().Name
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting link %s: %w", name, err))
			continue
		}
		removed = append(removed, "link "+name)
	}
	return removed, errors.Join(errs...)
}

// slotMounts lists the mount points, deepest first, of the lanes' pinned
// netns and of the rig's FUSE mounts.
func slotMounts(lanes []string, prefix string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		point := unescapeMountinfo(fields[4])
		fsType, source := fields[sep+1], fields[sep+2]
		// The rig's FUSE mounts name their source after its prefix
		// (test/rig/sysfs ServeConfig.Owner).
		mine := strings.HasPrefix(fsType, "fuse.") && (source == prefix+"-sysfs" || source == prefix+"-vfio")
		for _, l := range lanes {
			mine = mine || strings.Contains(point, "/lanes/"+l+"/netns/")
		}
		if mine {
			out = append(out, point)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes of space, tab,
// newline and backslash in a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// listeners returns the processes (pid and comm) with a TCP socket
// listening on one of s's ports, read from this netns's tcp{,6} (a LISTEN
// socket's inode) and each process's fds.
func listeners(s *Slot) (map[int]string, error) {
	ports := map[uint64]bool{}
	for i := range portsPerSlot {
		ports[uint64(s.port(i))] = true
	}
	inodes := map[string]bool{}
	// /proc/net is the main thread's netns, which a netns helper may have
	// left elsewhere (nsutil.Create); thread-self is this locked thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, table := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if port, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && ports[port] {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	out := map[int]string{}
	if len(inodes) == 0 {
		return out, nil
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd")) // gone meanwhile: nothing to kill
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && inodes[l] {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				out[pid] = strings.TrimSpace(string(comm))
				break
			}
		}
	}
	return out, nil
}
