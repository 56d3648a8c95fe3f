package lane

import (
	"os"
	"path/filepath"
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
	mk := func(numvfs string, drivers ...string) {
		os.RemoveAll(filepath.Join(root, "bus"))
		os.MkdirAll(sys.Device(pf), 0o755)
		os.WriteFile(sys.Attr(pf, "sriov_numvfs"), []byte(numvfs+"\n"), 0o644)
		for i, d := range drivers {
			vf := "0000:3b:02." + string(rune('0'+i))
			os.MkdirAll(sys.Device(vf), 0o755)
			os.Symlink("../"+vf, sys.Attr(pf, "virtfn"+string(rune('0'+i))))
			if d != "" {
				os.MkdirAll(filepath.Join(root, "bus/pci/drivers", d), 0o755)
				os.Symlink(filepath.Join(root, "bus/pci/drivers", d), sys.Attr(vf, "driver"))
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
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "1 on iavf") {
		t.Errorf("a VF rebound: %q", p)
	}
	l.VFDriver = config.VFDriverNetdevice
	mk("2", "iavf", "")
	if p := vfProblem(l, sys, pf); !strings.Contains(p, "1 on none") {
		t.Errorf("netdevice mode, a VF without driver: %q", p)
	}
}
