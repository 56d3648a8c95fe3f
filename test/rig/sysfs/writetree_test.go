package sysfs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A written tree is the kernel's layout, for a reader without root: the
// attributes, the links between devices, drivers, IOMMU groups and
// netdevs, and the state the stores left.
func TestWriteTreeLayout(t *testing.T) {
	k, err := NewKernel(KernelConfig{PFs: []PF{{Name: "rgs0", MAC: "AA:BB:CC:00:00:01"}, {Name: "rgs1", MAC: "aa:bb:cc:00:00:02"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	pf0, pf1 := PFBDF(0), PFBDF(1)
	vf0, vf1 := VFBDF(pf0, 0), VFBDF(pf0, 1)
	for _, s := range []struct {
		what  string
		errno syscall.Errno
	}{
		{"autoprobe of PF 1 off", k.StoreAutoprobe(pf1, []byte("0\n"))},
		{"2 VFs on PF 0", k.StoreNumVFs(pf0, []byte("2\n"))}, // autoprobe on: iavf
		{"VF 0 off iavf", k.StoreUnbind(X710.VFDriver, []byte(vf0+"\n"))},
		{"VF 0 override", k.StoreOverride(vf0, []byte(DriverVFIO+"\n"))},
		{"VF 0 to vfio-pci", k.StoreBind(DriverVFIO, []byte(vf0+"\n"))},
	} {
		if s.errno != 0 {
			t.Fatalf("%s: %v", s.what, s.errno)
		}
	}
	root := filepath.Join(t.TempDir(), "sys")
	if err := k.WriteTree(root); err != nil {
		t.Fatal(err)
	}
	if err := k.WriteTree(root); err == nil {
		t.Error("a second WriteTree into the same directory succeeded")
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
	dev := func(bdf string) string { return "devices/pci0000:00/" + bdf }
	// <device>/<attribute>=<value>
	for _, a := range []string{
		pf1 + "/vendor=0x8086", pf1 + "/device=0x1572", pf1 + "/class=0x020000", pf1 + "/numa_node=0",
		pf1 + "/sriov_totalvfs=8", pf1 + "/sriov_numvfs=0", pf1 + "/sriov_drivers_autoprobe=0",
		pf1 + "/driver_override=(null)", pf1 + "/net/rgs1/address=aa:bb:cc:00:00:02",
		pf0 + "/net/rgs0/address=aa:bb:cc:00:00:01", pf0 + "/sriov_numvfs=2",
		vf0 + "/device=0x154c", vf0 + "/driver_override=" + DriverVFIO,
	} {
		bdfAttr, want, _ := strings.Cut(a, "=")
		rel := "devices/pci0000:00/" + bdfAttr
		if got := attr(rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	for rel, want := range map[string]string{
		"bus/pci/devices/" + pf1:                       dev(pf1),
		dev(pf1) + "/driver":                           "bus/pci/drivers/i40e",
		"bus/pci/drivers/i40e/" + pf1:                  dev(pf1),
		"class/net/rgs1":                               dev(pf1) + "/net/rgs1",
		"class/net/rgs1/device":                        dev(pf1),
		dev(pf1) + "/iommu_group":                      "kernel/iommu_groups/1040",
		"kernel/iommu_groups/1040/devices/" + pf1:      dev(pf1),
		dev(pf0) + "/virtfn1":                          dev(vf1),
		dev(vf1) + "/physfn":                           dev(pf0),
		dev(vf1) + "/driver":                           "bus/pci/drivers/iavf",
		dev(vf0) + "/driver":                           "bus/pci/drivers/vfio-pci",
		"bus/pci/drivers/vfio-pci/" + vf0:              dev(vf0),
		"kernel/iommu_groups/1025/devices/" + vf0:      dev(vf0),
		"bus/pci/devices/" + vf1 + "/physfn/net/rgs0/": dev(pf0) + "/net/rgs0",
	} {
		if got := resolve(rel); got != want {
			t.Errorf("%s -> %q, want %q", rel, got, want)
		}
	}
	for _, rel := range []string{
		"module/vfio_pci", "bus/pci/drivers/iavf", "bus/pci/drivers/vfio-pci",
	} {
		if fi, err := os.Stat(filepath.Join(root, rel)); err != nil || !fi.IsDir() {
			t.Errorf("%s not a directory: %v", rel, err)
		}
	}
	// The stores are files, as in sysfs; here they store nothing.
	for _, rel := range []string{"bus/pci/drivers_probe", "bus/pci/drivers/iavf/bind", "bus/pci/drivers/vfio-pci/unbind"} {
		if fi, err := os.Lstat(filepath.Join(root, rel)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s not a file: %v", rel, err)
		}
	}
	for _, rel := range []string{
		dev(pf1) + "/virtfn0", // no VFs on PF 1
		dev(vf0) + "/net",     // vfio-pci registers no netdev
		dev(pf0) + "/virtfn2",
	} {
		if _, err := os.Lstat(filepath.Join(root, rel)); !os.IsNotExist(err) {
			t.Errorf("%s exists: %v", rel, err)
		}
	}
	if got := names(t, filepath.Join(root, dev(vf1), "net")); len(got) != 0 {
		t.Errorf("net/ of a VF on iavf holds %v: no VF netdevs without a peer netns", got)
	}
	if got := names(t, filepath.Join(root, dev(pf0), "net", "rgs0")); len(got) != 2 || got[0] != "address" || got[1] != "device" {
		t.Errorf("net/rgs0 of a written tree holds %v, want [address device]: it has no link to read the rest from", got)
	}
}
