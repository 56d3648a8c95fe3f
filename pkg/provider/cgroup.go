package provider

import (
	"fmt"
	"path/filepath"

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
