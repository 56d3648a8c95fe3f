package guest_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/kernel/guest"
)

// KernelConfigEnv names the guest path of the kernel's build config
// (Debian's /boot/config-<release>), when the host passed it in.
const KernelConfigEnv = "SRIOV_LANE_KERNEL_CONFIG"

// The kernel has no VFIO device cdevs and no iommufd: no
// /dev/vfio/devices, no /dev/iommu, no dev number on the vfio-dev devices
// of a vfio-pci VF, and its config says so. There holders can only hold a
// VF through its group file or a device fd got from it. (A kernel with
// CONFIG_VFIO_DEVICE_CDEV, 6.6+ with iommufd, has /dev/vfio/devices/vfioN
// too, which a user can open without ever opening the group file;
// pkg/sriov matches such a holder by the cdev's device number.)
func TestNoDeviceCdevs(t *testing.T) {
	_, _, _, vfs := upLane(t, "cdev", 0, 1, config.VFDriverVFIO)
	facts := map[string]any{}
	for _, p := range []string{"/dev/vfio/devices", "/dev/iommu"} {
		_, err := os.Stat(p)
		facts[p] = err == nil
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it absent on this kernel", p, err)
		}
	}
	devs, _ := filepath.Glob(sys.Attr(vfs[0].PCI, "vfio-dev/vfio*/dev"))
	facts["vfio-dev/*/dev of "+vfs[0].PCI] = devs
	if len(devs) != 0 {
		t.Errorf("VF %s has a VFIO device cdev: %v", vfs[0].PCI, devs)
	}
	if path := os.Getenv(KernelConfigEnv); path != "" {
		opts, err := kernelConfig(path, "CONFIG_VFIO_DEVICE_CDEV", "CONFIG_IOMMUFD", "CONFIG_VFIO_GROUP", "CONFIG_VFIO_CONTAINER")
		if err != nil {
			t.Fatal(err)
		}
		facts[filepath.Base(path)] = opts
		for _, o := range []string{"CONFIG_VFIO_DEVICE_CDEV", "CONFIG_IOMMUFD"} {
			if v := opts[o]; v == "y" || v == "m" {
				t.Errorf("%s: %s=%s", path, o, v)
			}
		}
	} else {
		t.Logf("no kernel config passed in (%s unset): the runtime checks above stand alone", KernelConfigEnv)
	}
	guest.Record(t, "vfio-cdev", facts)
}

// kernelConfig reads the named options: "y", "m", a value, or "not set".
func kernelConfig(path string, names ...string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	for _, n := range names {
		out[n] = "absent"
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			switch {
			case strings.HasPrefix(line, n+"="):
				out[n] = strings.TrimPrefix(line, n+"=")
			case line == "# "+n+" is not set":
				out[n] = "not set"
			}
		}
	}
	return out, sc.Err()
}

// What the emulated igb answers when asked for the VF settings a suite
// would test: recorded, so pkg/sriov's list of what QEMU's igb lacks
// (emulated.go) is checked against this kernel and QEMU. VF link state
// must be refused: that list names it.
func TestEmulatedIGBVFSettings(t *testing.T) {
	_, pf, pin, _ := upLane(t, "vfset", 1, 1, config.VFDriverVFIO)
	h, err := netlink.NewHandleAt(mustOpen(t, pin), netlinkRoute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link := linkIn(t, pin, pf.MAC)
	if link == nil {
		t.Fatalf("%s not in the agent's netns", pf)
	}
	res := map[string]string{}
	try := func(what string, err error) {
		if err == nil {
			res[what] = "ok"
		} else {
			res[what] = err.Error()
		}
	}
	// The PF is up, as in a node using it: igb refuses a VF rate while
	// its link speed is not 1000 Mb/s, and a moved link comes in down.
	try("PF up", h.LinkSetUp(link))
	try("link state disable", h.LinkSetVfState(link, 0, netlink.VF_LINK_STATE_DISABLE))
	try("spoof check on", h.LinkSetVfSpoofchk(link, 0, true))
	try("trust on", h.LinkSetVfTrust(link, 0, true))
	try("max tx rate 100", h.LinkSetVfRate(link, 0, 0, 100))
	try("vlan 10", h.LinkSetVfVlan(link, 0, 10))
	guest.Record(t, "igb-vf-settings", res)
	if res["link state disable"] == "ok" {
		t.Errorf("the igb PF took a VF link state, which pkg/sriov lists as lacking: %v", res)
	}
}
