package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// fakeTree makes the rig's plain fake sysfs (no root needed): PF 0 "rgd0"
// with 4 VFs (0,1 on vfio-pci, 2,3 on iavf), PF 1 "rgd1" with 3 VFs on
// vfio-pci, PF 2 "rgd2" with no VFs.
func fakeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := sysfs.Build(root, []sysfs.PF{{Name: "rgd0", MAC: "02:00:00:dd:00:01"}, {Name: "rgd1", MAC: "02:00:00:dd:00:02"},
		{Name: "rgd2", MAC: "02:00:00:dd:00:03"}}); err != nil {
		t.Fatal(err)
	}
	em := sysfs.NewEmulator(sysfs.EmulatorConfig{Root: root})
	tree := sysfs.Tree{Root: root}
	for pf, n := range []string{"4", "3"} {
		store(t, filepath.Join(tree.DeviceDir(sysfs.PFBDF(pf)), "sriov_numvfs"), n)
		em.Sync()
	}
	for _, vf := range []string{vf(0, 0), vf(0, 1), vf(1, 0), vf(1, 1), vf(1, 2)} {
		store(t, filepath.Join(tree.DriverDir(sysfs.DriverVF), "unbind"), vf)
		em.Sync()
		store(t, filepath.Join(tree.DeviceDir(vf), "driver_override"), sysfs.DriverVFIO)
		store(t, filepath.Join(tree.DriverDir(sysfs.DriverVFIO), "bind"), vf)
		em.Sync()
		if d := tree.Driver(vf); d != sysfs.DriverVFIO {
			t.Fatalf("fixture: %s driver %q", vf, d)
		}
	}
	return root
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

// pools selects with cfg and returns, per "<prefix>/<name>", the sorted
// PCI addresses.
func pools(t *testing.T, root, cfg string) map[string][]string {
	t.Helper()
	out, err := selectIDs(root, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func selectIDs(root, cfg string) (map[string][]string, error) {
	list, err := readConfig([]byte(cfg), nowarn)
	if err != nil {
		return nil, err
	}
	if err := validConfigs(list, "intel.com"); err != nil {
		return nil, err
	}
	got, err := selectPools(root, list, nowarn)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for rc, devs := range got {
		var ids []string
		for _, d := range devs {
			ids = append(ids, d.bdf)
		}
		sort.Strings(ids)
		out[rc.prefix("intel.com")+"/"+rc.ResourceName] = ids
	}
	return out, nil
}

func TestPoolsAreSelectedAsUpstreamSelectorsDo(t *testing.T) {
	root := fakeTree(t)
	pf0vfio, pf0iavf := []string{vf(0, 0), vf(0, 1)}, []string{vf(0, 2), vf(0, 3)}
	pf1 := []string{vf(1, 0), vf(1, 1), vf(1, 2)}
	cases := []struct {
		name, cfg string
		want      map[string][]string
	}{
		// What the product writes (pkg/cni/dpconfig.go devicePluginConfig).
		{"product's vfio pool", `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice",
			"selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd0","rgd1"]}]}]}`,
			map[string][]string{"kubevirt.io/sriov_net": append(append([]string{}, pf0vfio...), pf1...)}},
		{"product's netdevice pool", `{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice",
			"selectors":[{"drivers":["iavf","mlx5_core","ixgbevf"],"pfNames":["rgd0"]}]}]}`,
			map[string][]string{"kubevirt.io/sriov_net": pf0iavf}},
		{"selectors object, default prefix", `{"resourceList":[{"resourceName":"r","selectors":{"drivers":["vfio-pci"],"pfNames":["rgd1"]}}]}`,
			map[string][]string{"intel.com/r": pf1}},
		{"pfNames is case-insensitive, with index ranges", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["RGD0#1,3"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(0, 1), vf(0, 3)}}},
		{"pfNames range a-b", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["rgd1#1-2"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(1, 1), vf(1, 2)}}},
		{"only the first entry for a PF counts", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["rgd1#0","rgd1#2"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(1, 0)}}},
		{"a malformed range selects nothing", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["rgd1#x-2"]}]}]}`,
			map[string][]string{}},
		{"rootDevices by PF address", `{"resourceList":[{"resourceName":"r","selectors":[{"rootDevices":["` + sysfs.PFBDF(1) + `#0"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(1, 0)}}},
		// ghw's ids have no 0x; upstream compares strings as written.
		{"vendor and device ids without 0x", `{"resourceList":[{"resourceName":"r","selectors":[{"vendors":["8086"],"devices":["154c"],"drivers":["iavf"]}]}]}`,
			map[string][]string{"intel.com/r": pf0iavf}},
		{"ids with 0x match nothing", `{"resourceList":[{"resourceName":"r","selectors":[{"vendors":["0x8086"]}]}]}`,
			map[string][]string{}},
		{"pciAddresses", `{"resourceList":[{"resourceName":"r","selectors":[{"pciAddresses":["` + vf(1, 2) + `","` + vf(0, 0) + `"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(0, 0), vf(1, 2)}}},
		// A PF with VFs is never a device; one without VFs is (its PF
		// name is "", so it needs no pfNames).
		{"PFs: only those without VFs", `{"resourceList":[{"resourceName":"r","selectors":[{"drivers":["i40e"]}]}]}`,
			map[string][]string{"intel.com/r": {sysfs.PFBDF(2)}}},
		{"the first pool takes a device, empty pools are left out", `{"resourceList":[
			{"resourceName":"all","selectors":[{"pfNames":["rgd0"]}]},
			{"resourceName":"vfio","selectors":[{"drivers":["vfio-pci"]}]},
			{"resourceName":"none","selectors":[{"pfNames":["nosuch"]}]}]}`,
			map[string][]string{"intel.com/all": append(append([]string{}, pf0vfio...), pf0iavf...), "intel.com/vfio": pf1}},
		{"selectors are OR'ed in order", `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["rgd1#0"]},{"pfNames":["rgd0#3"]}]}]}`,
			map[string][]string{"intel.com/r": {vf(0, 3), vf(1, 0)}}},
		{"no RDMA, DDP, pKeys or vDPA on the rig", `{"resourceList":[
			{"resourceName":"a","selectors":[{"isRdma":true}]},
			{"resourceName":"b","selectors":[{"ddpProfiles":["GTPv1-C/U IPv4/IPv6 payload"]}]},
			{"resourceName":"c","selectors":[{"pKeys":["0x1"]}]},
			{"resourceName":"d","selectors":[{"vdpaType":"vhost"}]}]}`,
			map[string][]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pools(t, root, c.cfg); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestUnboundFunctionsAndExcludeTopology(t *testing.T) {
	root := fakeTree(t)
	tree := sysfs.Tree{Root: root}
	store(t, filepath.Join(tree.DriverDir(sysfs.DriverVF), "unbind"), vf(0, 3))
	sysfs.NewEmulator(sysfs.EmulatorConfig{Root: root}).Sync()
	if got := pools(t, root, `{"resourceList":[{"resourceName":"r","selectors":[{"pfNames":["rgd0#2-3"]}]}]}`); !reflect.DeepEqual(got["intel.com/r"], []string{vf(0, 2)}) {
		t.Errorf("a VF without a driver was selected: %v", got)
	}
	for _, c := range []struct {
		cfg  string
		numa int
	}{
		{`{"resourceList":[{"resourceName":"r","selectors":[{"pciAddresses":["` + vf(0, 0) + `"]}]}]}`, 0},
		{`{"resourceList":[{"resourceName":"r","excludeTopology":true,"selectors":[{"pciAddresses":["` + vf(0, 0) + `"]}]}]}`, -1},
	} {
		list, err := readConfig([]byte(c.cfg), nowarn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := selectPools(root, list, nowarn)
		if err != nil {
			t.Fatal(err)
		}
		d := got[list[0]][0]
		if d.numaNode != c.numa || d.iommuGroup == "" || d.driver != "vfio-pci" || d.pfName != "rgd0" || d.pfBDF != sysfs.PFBDF(0) || d.funcID != 0 {
			t.Errorf("%s: device %+v, want NUMA %d and VF 0 of rgd0 on vfio-pci with its group", c.cfg, *d, c.numa)
		}
	}
}

func TestConfigIsReadAndRefusedAsUpstreamDoes(t *testing.T) {
	var warned []string
	warn := func(f string, a ...any) { warned = append(warned, f) }
	list, err := readConfig([]byte(`{"resourceList":[
		{"resourceName":"ok","selectors":[{"drivers":["vfio-pci"]}],"unknownKey":1},
		{"resourceName":"badsel","selectors":"x"},
		{"resourceName":"emptysel","selectors":[]}]}`), warn)
	if err != nil || len(list) != 1 || list[0].ResourceName != "ok" || list[0].DeviceType != netDeviceType || len(warned) != 2 {
		t.Errorf("readConfig = %v, %v (warnings %d): want only \"ok\", as netDevice, and two pools left out with a warning", list, err, len(warned))
	}
	for name, cfg := range map[string]string{
		"not json":                           `{"resourceList":`,
		"unknown type":                       `{"resourceList":[{"resourceName":"r","deviceType":"gpu","selectors":[{}]}]}`,
		"accelerator (not in the stand-in)":  `{"resourceList":[{"resourceName":"r","deviceType":"accelerator","selectors":[{}]}]}`,
		"auxNetDevice (not in the stand-in)": `{"resourceList":[{"resourceName":"r","deviceType":"auxNetDevice","selectors":[{}]}]}`,
		"needVhostNet (not in the stand-in)": `{"resourceList":[{"resourceName":"r","selectors":[{"needVhostNet":true}]}]}`,
	} {
		if _, err := readConfig([]byte(cfg), nowarn); err == nil {
			t.Errorf("%s: accepted %s", name, cfg)
		}
	}
	for name, cfg := range map[string]string{
		"bad name":            `{"resourceList":[{"resourceName":"a.b","selectors":[{}]}]}`,
		"duplicate":           `{"resourceList":[{"resourceName":"r","selectors":[{}]},{"resourceName":"r","resourcePrefix":"intel.com","selectors":[{}]}]}`,
		"isRdma and vdpaType": `{"resourceList":[{"resourceName":"r","selectors":[{"isRdma":true,"vdpaType":"vhost"}]}]}`,
	} {
		list, err := readConfig([]byte(cfg), nowarn)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := validConfigs(list, "intel.com"); err == nil {
			t.Errorf("%s: valid: %s", name, cfg)
		}
	}
	// Same name, another prefix: two pools.
	list, _ = readConfig([]byte(`{"resourceList":[{"resourceName":"r","selectors":[{}]},{"resourceName":"r","resourcePrefix":"example.com","selectors":[{}]}]}`), nowarn)
	if err := validConfigs(list, "intel.com"); err != nil {
		t.Errorf("same name under two prefixes: %v", err)
	}
	if _, err := selectPools(t.TempDir(), list, nowarn); err == nil || !strings.Contains(err.Error(), "PCI") {
		t.Errorf("a sysfs without bus/pci/devices: %v", err)
	}
}
