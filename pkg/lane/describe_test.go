package lane

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// vfProblem is what status and repair (so reset) check of a PF in place.
func TestVFProblem(t *testing.T) {
	root := t.TempDir()
	sys := sriov.Sysfs{Root: root}
	const pf = "0000:3b:00.0"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mk := func(numvfs string, drivers ...string) {
		t.Helper()
		must(os.RemoveAll(filepath.Join(root, "bus")))
		must(os.MkdirAll(sys.Device(pf), 0o755))
		must(os.WriteFile(sys.Attr(pf, "sriov_numvfs"), []byte(numvfs+"\n"), 0o644))
		for i, d := range drivers {
			vf := "0000:3b:02." + string(rune('0'+i))
			must(os.MkdirAll(sys.Device(vf), 0o755))
			must(os.Symlink("../"+vf, sys.Attr(pf, "virtfn"+string(rune('0'+i)))))
			if d != "" {
				must(os.MkdirAll(filepath.Join(root, "bus/pci/drivers", d), 0o755))
				must(os.Symlink(filepath.Join(root, "bus/pci/drivers", d), sys.Attr(vf, "driver")))
			}
		}
	}
	l := config.Default()
	l.VFsPerPF = 2
	mk("2", "vfio-pci", "vfio-pci")
	if p := vfProblem(l, sys, pf); p != "" {
		t.Errorf("VFs as configured: %q", p)
	}
	mk("0")
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "0 VFs, want 2") {
		t.Errorf("no VFs: %q", p)
	}
	mk("2", "vfio-pci", "iavf")
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "VF 1 (0000:3b:02.1) on iavf, want every VF on vfio-pci") {
		t.Errorf("a VF rebound: %q", p)
	}
	l.VFDriver = config.VFDriverNetdevice
	// Any kernel driver will do: the NIC decides which one its VFs get.
	mk("2", "igbvf", "bnxt_en")
	if p := vfProblem(l, sys, pf); p != "" {
		t.Errorf("netdevice mode, VFs on kernel drivers: %q", p)
	}
	mk("2", "iavf", "")
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "VF 1 (0000:3b:02.1) on none") {
		t.Errorf("netdevice mode, a VF without driver: %q", p)
	}
	mk("2", "vfio-pci", "")
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "VF 0 (0000:3b:02.0) on vfio-pci, VF 1 (0000:3b:02.1) on none, want every VF on a kernel driver") {
		t.Errorf("netdevice mode, a VF on vfio-pci and one without driver: %q", p)
	}

	// status lists every VF with its driver, in index order.
	mk("2", "igbvf", "")
	got := vfStatuses(sys, pf)
	want := []VFStatus{{Index: 0, PCI: "0000:3b:02.0", Driver: "igbvf"}, {Index: 1, PCI: "0000:3b:02.1", Driver: "none"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vfStatuses = %+v, want %+v", got, want)
	}
	text := FormatStatus(&LaneStatus{Name: "x", Health: "healthy", PFs: []PFStatus{{Name: "eth1", PCI: pf, VFs: got}}})
	for _, line := range []string{"0\teth1\t0000:3b:02.0\tigbvf\n", "1\teth1\t0000:3b:02.1\tnone\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("status text has no line %q:\n%s", line, text)
		}
	}
}

// TestFormatStatusShowsWhatOffersTheVFs: a device plugin lane's node rows
// show allocatable, a dra lane's the devices its slices offer.
func TestFormatStatusShowsWhatOffersTheVFs(t *testing.T) {
	node := NodeStatus{Name: "k3d-sriov-agent-0", Role: "agent", Ready: "True", Allocatable: "kubevirt.io/sriov_net=6", DRADevices: "6 VFs (ens1f0 6)"}
	for alloc, want := range map[string]string{
		config.VFAllocationDevicePlugin: "ALLOCATABLE\nk3d-sriov-agent-0\tagent\t\tTrue\tkubevirt.io/sriov_net=6\n",
		config.VFAllocationDRA:          "DRA-DEVICES\nk3d-sriov-agent-0\tagent\t\tTrue\t6 VFs (ens1f0 6)\n",
	} {
		text := FormatStatus(&LaneStatus{Name: "x", Health: "healthy", VFAllocation: alloc, Nodes: []NodeStatus{node}})
		if !strings.Contains(text, want) {
			t.Errorf("%s: status text lacks %q:\n%s", alloc, want, text)
		}
	}
}
