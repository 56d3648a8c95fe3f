package rigsysfs

import (
	"fmt"
	"github.com/sriov-lane/sriov-lane/test/standin/conformance"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Conformance: where the real components read sysfs, and where the
// stand-ins do instead. Every row but the last is a deviation the rig
// needs: the product, like upstream's DaemonSets, mounts no /sys into the
// device plugin's pod, and Multus runs sriov-cni chrooted into the node's
// root, so a stand-in reading /sys would see the build machine's PCI tree,
// not the rig's fake one.
type row = conformance.Row

func TestConformanceWhereSysfsIs(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty") // exists, no bus/pci/devices
	file := filepath.Join(dir, "file")   // bus/pci/devices is a file
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(file, "bus", "pci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(file, "bus", "pci", "devices"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mkPCI(t, first)
	mkPCI(t, second)
	name := func(p string) string { return strings.TrimPrefix(p, dir+"/") }
	find := func(roots ...string) func(*testing.T) string {
		return func(*testing.T) string {
			got, err := FindIn(roots)
			if err != nil {
				return strings.ReplaceAll(err.Error(), dir+"/", "")
			}
			return name(got)
		}
	}
	const why = "the rig mounts its fake sysfs in every agent at " + NodePath + " (test/rig/laneconfig.go): the device plugin's pod has the node's /var/log as a hostPath, and Multus runs delegates chrooted into the node's / (its pod has it at /hostroot), and the DRA driver's pod, with hostPID, reaches the node's / as /proc/1/root"
	conformance.Check(t, []row{
		{Src: "k8snetworkplumbingwg/sriov-network-device-plugin pkg/utils/utils.go@v3.11.0 sysBusPci; jaypipes/ghw pkg/linuxpath@v0.19.1", What: "the device plugin reads /sys/bus/pci/devices",
			Got:  func(*testing.T) string { return strings.Join(Candidates, " ") },
			Want: "/var/log/sriov-lane-rig/sys /hostroot/var/log/sriov-lane-rig/sys /proc/1/root/var/log/sriov-lane-rig/sys /sys", Deviation: "the stand-ins try these, in order: " + why},
		{Src: "k8snetworkplumbingwg/sriov-cni pkg/utils/utils.go@v2.10.0 SysBusPci, NetDirectory; k8snetworkplumbingwg/multus-cni pkg/server/exec_chroot.go@v4.3.0", What: "sriov-cni reads /sys/bus/pci/devices and /sys/class/net, run by Multus chrooted into the node's root",
			Got: func(*testing.T) string { return fmt.Sprint(Candidates[0] == NodePath) }, Want: "true", Deviation: why},
		{Src: "k8snetworkplumbingwg/sriov-network-device-plugin pkg/utils/utils.go@v3.11.0", What: "the first place with a bus/pci/devices directory is taken; a missing place, one without it, or one where it is a file is passed over",
			Got: find(missing, empty, file, second, first), Want: "second", Deviation: "the order is the stand-ins' own"},
		{Src: "k8snetworkplumbingwg/sriov-network-device-plugin pkg/utils/utils.go@v3.11.0", What: "nowhere: an error naming every place tried",
			Got: find(missing, empty), Want: "no sysfs with bus/pci/devices at missing, empty", Deviation: "upstream always reads /sys, which always exists"},
		{Src: "k8snetworkplumbingwg/sriov-cni pkg/utils/utils.go@v2.10.0 SysBusPci", What: "off the rig (nothing mounted at the node path) the stand-ins read /sys, as upstream",
			Got: find(missing, filepath.Join(missing, "hostroot"), first), Want: "first"},
	})
}
