package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// HostCgroupRoot is where the cgroup hierarchy is mounted, here and in
// every container Docker starts on this kernel.
//
// It is deliberately not taken from the lane's sysfsRoot: the cgroup
// hierarchy is a filesystem of its own mounted on /sys/fs/cgroup, not part of
// sysfs, and a host /sys bind-mounted elsewhere (what sysfsRoot is for)
// usually comes without its submounts. The nodes' kubelets see the cgroup
// mode Docker gives their containers, which follows the kernel's boot mode,
// and so does this process's own /sys/fs/cgroup, on the host or in a CI pod.
// (The test rig's fake sysfs has no cgroup tree either, so reading it there
// would hide the real host's mode from the rig.)
const HostCgroupRoot = "/sys/fs/cgroup"

// CgroupMode is how the cgroup hierarchy is mounted.
type CgroupMode string

const (
	// CgroupUnknown is a mount detection could not classify.
	CgroupUnknown CgroupMode = ""
	// CgroupV1 is the legacy layout: a tmpfs of v1 controller hierarchies.
	CgroupV1 CgroupMode = "v1"
	// CgroupHybrid is v1 with a cgroup2 tree at unified/ that controls no
	// controllers (systemd's hybrid mode). Kubelet counts it as v1.
	CgroupHybrid CgroupMode = "hybrid"
	// CgroupV2 is the unified hierarchy mounted at the root.
	CgroupV2 CgroupMode = "v2"
)

// V1 reports whether kubelet treats the host as cgroup v1: it asks only
// whether the root is cgroup2 (kubernetes/kubernetes
// pkg/kubelet/apis/config/validation/validation_linux.go@v1.35.5,
// !IsCgroup2UnifiedMode()), so hybrid is v1 to it.
func (m CgroupMode) V1() bool { return m == CgroupV1 || m == CgroupHybrid }

// Describe says the mode in words for check and up.
func (m CgroupMode) Describe() string {
	switch m {
	case CgroupV1:
		return "cgroup v1"
	case CgroupHybrid:
		return "cgroup v1 (hybrid: v1 controllers, a v2 hierarchy at unified/)"
	case CgroupV2:
		return "cgroup v2"
	}
	return "cgroup version unknown"
}

// DetectCgroup classifies the cgroup mount at root by its filesystem type,
// as runc and systemd do: cgroup2 at the root is v2; a tmpfs is v1, hybrid
// when root/unified is cgroup2.
func DetectCgroup(root string) (CgroupMode, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return CgroupUnknown, fmt.Errorf("detecting the cgroup version: statfs %s: %w", root, err)
	}
	switch int64(st.Type) {
	case unix.CGROUP2_SUPER_MAGIC:
		return CgroupV2, nil
	case unix.TMPFS_MAGIC:
		unified := filepath.Join(root, "unified")
		var ust unix.Statfs_t
		if err := unix.Statfs(unified, &ust); err == nil && int64(ust.Type) == unix.CGROUP2_SUPER_MAGIC {
			return CgroupHybrid, nil
		}
		return CgroupV1, nil
	}
	return CgroupUnknown, fmt.Errorf("detecting the cgroup version: %s is neither cgroup2 nor tmpfs (filesystem type 0x%x)", root, st.Type)
}

// thawFrozen thaws every cgroup v1 freezer cgroup at or below the one of
// process pid (a node container's init) and returns those it thawed. A
// runc killed between freezing a container's cgroup and thawing it (cgroup
// v1's fs manager freezes one while it rewrites its device rules) leaves
// it frozen, and a frozen task takes no signal, SIGKILL included, until it
// is thawed: Docker's kill of the node then waits for an exit that never
// comes ("tried to kill container, but did not receive an exit event"),
// and the node can be neither stopped nor removed. Seen on this project's
// CI host (hybrid cgroups): a pod's container in an agent left FROZEN, its
// task in the kernel's refrigerator, until its freezer.state was written
// THAWED, after which the node went. Under cgroup v2 a fatal signal ends a
// frozen task, and there is no freezer hierarchy to walk.
func thawFrozen(pid int) ([]string, error) {
	rel, err := freezerCgroup(pid)
	if err != nil || rel == "" {
		return nil, err
	}
	var thawed []string
	root := filepath.Join(HostCgroupRoot, "freezer", rel)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // gone while walked: nothing to thaw
		case err != nil:
			return err
		case d.IsDir() || d.Name() != "freezer.state":
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if s := strings.TrimSpace(string(b)); s != "FROZEN" && s != "FREEZING" {
			return nil
		}
		if err := os.WriteFile(p, []byte("THAWED"), 0); err != nil {
			return fmt.Errorf("thawing cgroup %s: %w", filepath.Dir(p), err)
		}
		thawed = append(thawed, filepath.Dir(p))
		return nil
	})
	return thawed, err
}

// freezerCgroup is process pid's cgroup in the v1 freezer hierarchy
// (its /proc/PID/cgroup line "N:freezer:/PATH"), or "" without one.
func freezerCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil // the process has ended
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "freezer") {
			return parts[2], nil
		}
	}
	return "", nil
}
