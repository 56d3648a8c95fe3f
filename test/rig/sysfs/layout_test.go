package sysfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBuildLayout(t *testing.T) {
	root := t.TempDir()
	pfs := []PF{{Name: "rgs0", MAC: "AA:BB:CC:00:00:01"}, {Name: "rgs1", MAC: "aa:bb:cc:00:00:02"}}
	if err := Build(root, pfs); err != nil {
		t.Fatal(err)
	}
	// Building again must not reset state someone changed.
	if err := os.WriteFile(filepath.Join(root, "devices/pci0000:00/0000:41:00.0/sriov_drivers_autoprobe"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Build(root, pfs); err != nil {
		t.Fatalf("second Build: %v", err)
	}
	attr := func(rel string) string {
		t.Helper()
		v, err := ReadAttr(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("reading %s: %v", rel, err)
		}
		return v
	}
	resolve := func(rel string) string {
		t.Helper()
		p, err := filepath.EvalSymlinks(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("resolving %s: %v", rel, err)
		}
		r, _ := filepath.Rel(root, p)
		return r
	}
	pf1 := "devices/pci0000:00/0000:41:00.0"
	checks := map[string]string{
		pf1 + "/vendor":                                    "0x8086",
		pf1 + "/device":                                    "0x1572",
		pf1 + "/class":                                     "0x020000",
		pf1 + "/sriov_totalvfs":                            "8",
		pf1 + "/sriov_numvfs":                              "0",
		pf1 + "/sriov_drivers_autoprobe":                   "0",
		pf1 + "/driver_override":                           "",
		pf1 + "/net/rgs1/address":                          "aa:bb:cc:00:00:02",
		"devices/pci0000:00/0000:40:00.0/net/rgs0/address": "aa:bb:cc:00:00:01",
		"bus/pci/drivers/vfio-pci/bind":                    "",
		"bus/pci/drivers/iavf/unbind":                      "",
		"bus/pci/drivers_probe":                            "",
	}
	for rel, want := range checks {
		if got := attr(rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	links := map[string]string{
		"bus/pci/devices/0000:41:00.0":                  pf1,
		pf1 + "/driver":                                 "bus/pci/drivers/i40e",
		"bus/pci/drivers/i40e/0000:41:00.0":             pf1,
		"class/net/rgs1":                                pf1 + "/net/rgs1",
		"class/net/rgs1/device":                         pf1,
		pf1 + "/iommu_group":                            "kernel/iommu_groups/1040",
		"kernel/iommu_groups/1040/devices/0000:41:00.0": pf1,
	}
	for rel, want := range links {
		if got := resolve(rel); got != want {
			t.Errorf("%s -> %q, want %q", rel, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "module/vfio_pci")); err != nil || !fi.IsDir() {
		t.Errorf("module/vfio_pci missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, pf1, "virtfn0")); !os.IsNotExist(err) {
		t.Errorf("virtfn0 exists before any VF was created: %v", err)
	}
}
