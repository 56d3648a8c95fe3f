package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// fakeKernel is the rig's fake kernel, not mounted (no root needed): PF 0
// "rgd0" with 4 VFs (0,1 on vfio-pci, 2,3 on iavf), PF 1 "rgd1" with 3 VFs
// on vfio-pci, PF 2 "rgd2" with no VFs, set through the kernel's stores.
func fakeKernel(t *testing.T) *sysfs.Kernel {
	t.Helper()
	k, err := sysfs.NewKernel(sysfs.KernelConfig{PFs: []sysfs.PF{{Name: "rgd0", MAC: "02:00:00:dd:00:01"},
		{Name: "rgd1", MAC: "02:00:00:dd:00:02"}, {Name: "rgd2", MAC: "02:00:00:dd:00:03"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	for pf, n := range []string{"4", "3"} {
		kstore(t, "sriov_numvfs of "+sysfs.PFBDF(pf), k.StoreNumVFs(sysfs.PFBDF(pf), []byte(n+"\n")))
	}
	for _, vf := range []string{vf(0, 0), vf(0, 1), vf(1, 0), vf(1, 1), vf(1, 2)} {
		kstore(t, "unbind "+vf, k.StoreUnbind(sysfs.X710.VFDriver, []byte(vf+"\n")))
		kstore(t, "driver_override of "+vf, k.StoreOverride(vf, []byte(sysfs.DriverVFIO+"\n")))
		kstore(t, "bind "+vf, k.StoreBind(sysfs.DriverVFIO, []byte(vf+"\n")))
	}
	return k
}

// fakeTree is fakeKernel's tree written to a plain directory.
func fakeTree(t *testing.T) string {
	t.Helper()
	return writeTree(t, fakeKernel(t))
}

// writeTree writes k's tree, as a mount of it shows it, and returns its root.
func writeTree(t *testing.T, k *sysfs.Kernel) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "sys")
	if err := k.WriteTree(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// kstore fails the test when one of the kernel's stores fails.
func kstore(t *testing.T, what string, errno syscall.Errno) {
	t.Helper()
	if errno != 0 {
		t.Fatalf("fixture: %s: %v", what, errno)
	}
}

func vf(pf, i int) string { return sysfs.VFBDF(sysfs.PFBDF(pf), i) }

func store(t *testing.T, p, v string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(v + "\n"); err != nil {
		t.Fatal(err)
	}
}

func nowarn(string, ...any) {}

// fakeNet answers netlink's part for the plain fake tree, where no link
// exists: every name is an ethernet link except those in missing, and
// those in routed carry an IPv4 default route.
type fakeNet struct{ missing, routed map[string]bool }

func (f fakeNet) encap(name string) (string, error) {
	if f.missing[name] {
		return "", fmt.Errorf("error getting link attributes for net device %s Link not found", name)
	}
	return "ether", nil
}

func (f fakeNet) defaultRoute(name string) (bool, error) { return f.routed[name], nil }

// selectIDs reads, validates and selects with cfg as run does and returns,
// per "<prefix>/<name>", the sorted PCI addresses.
func selectIDs(root, cfg string, nv netView) (map[string][]string, error) {
	list, err := readConfig([]byte(cfg), nowarn)
	if err != nil {
		return nil, err
	}
	if err := validConfigs(list, "intel.com"); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for rc, devs := range selectPools(root, list, nv, nowarn) {
		var ids []string
		for _, d := range devs {
			ids = append(ids, d.bdf)
		}
		sort.Strings(ids)
		out[rc.prefix("intel.com")+"/"+rc.ResourceName] = ids
	}
	return out, nil
}
