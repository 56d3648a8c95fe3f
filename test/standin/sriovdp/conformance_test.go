package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/standin/conformance"
	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
)

// Conformance: each input the product passes, or could pass, to the SR-IOV
// network device plugin (its image's arguments, config.json, what sysfs
// and netlink show it, what kubelet asks it), with what v3.11.0 does with
// it, read at the tag (git show v3.11.0:PATH), and the stand-in doing
// exactly that. A row with a deviation is where the stand-in must differ
// (no hardware, the rig's sysfs): it says how and why.
type row = conformance.Row

const (
	dp     = "k8snetworkplumbingwg/sriov-network-device-plugin "
	at     = "@v3.11.0"
	entry  = dp + "images/entrypoint.sh" + at
	mainGo = dp + "cmd/sriovdp/main.go" + at
	mgr    = dp + "cmd/sriovdp/manager.go" + at
	fact   = dp + "pkg/factory/factory.go" + at
	types  = dp + "pkg/types/types.go" + at
	prov   = dp + "pkg/netdevice/netDeviceProvider.go" + at
	sel    = dp + "pkg/resources/deviceSelectors.go" + at
	utils  = dp + "pkg/utils/utils.go" + at
	genNet = dp + "pkg/devices/gen_net.go" + at
	server = dp + "pkg/resources/server.go" + at
	stub   = dp + "pkg/resources/pool_stub.go" + at
	pool   = dp + "pkg/netdevice/netResourcePool.go" + at
	vfio   = dp + "pkg/infoprovider/vfioInfoProvider.go" + at
	nad    = "k8snetworkplumbingwg/network-attachment-definition-client pkg/utils/cniconfig.go@v1.7.7"
)

// outcome runs the plugin on the fake tree with cfg until its servers are
// up and says what it served, or how it ended: "exit N: message", with
// its temporary directory as $DIR.
func outcome(t *testing.T, root, cfg string, nv netView) string {
	t.Helper()
	o := testOptions(t, root)
	o.net = nv
	if err := os.MkdirAll(o.registryDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if cfg != "" {
		if err := os.WriteFile(o.configFile, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(30*time.Second))
	defer cancel()
	var served []string
	err := run(ctx, o, func(servers []*resourceServer) {
		for _, rs := range servers {
			ids := make([]string, 0, len(rs.devices))
			for id := range rs.devices {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			served = append(served, rs.resourceName()+" "+strings.Join(ids, ","))
		}
		cancel()
	})
	if err != nil {
		return fmt.Sprintf("exit %d: %s", exitCode(err), strings.ReplaceAll(err.Error(), filepath.Dir(o.configFile), "$DIR"))
	}
	if ctx.Err() == context.DeadlineExceeded {
		return "still starting"
	}
	sort.Strings(served)
	if len(served) == 0 {
		return "serves nothing, until signalled"
	}
	return "serves " + strings.Join(served, "; ")
}

func pool1(name string, selectors string) string {
	return `{"resourceList":[{"resourceName":"` + name + `","selectors":` + selectors + `}]}`
}

func ids(bdfs ...string) string { return strings.Join(bdfs, ",") }

// The fake tree (devices_test.go fakeTree): rgd0 with VFs 0,1 on vfio-pci
// and 2,3 on iavf; rgd1 with VFs 0-2 on vfio-pci; rgd2 without VFs.
var (
	pf0vfio = ids(vf(0, 0), vf(0, 1))
	pf0iavf = ids(vf(0, 2), vf(0, 3))
	pf1     = ids(vf(1, 0), vf(1, 1), vf(1, 2))
)

func TestConformanceEntrypoint(t *testing.T) {
	args := func(a ...string) func(*testing.T) string {
		return func(t *testing.T) string {
			logRoot := t.TempDir()
			o, err := parseArgs(a, logRoot)
			switch {
			case errors.Is(err, errHelp):
				return "usage, exit 0"
			case err != nil:
				return fmt.Sprintf("exit %d: %v", exitCode(err), err)
			}
			_, logErr := os.Stat(filepath.Join(logRoot, o.logDir))
			return fmt.Sprintf("prefix %s, config %s, -v %s, log dir %q made %v", o.resourcePrefix, o.configFile, o.logLevel, o.logDir, o.logDir != "" && logErr == nil)
		}
	}
	conformance.Check(t, []row{
		{Src: entry, What: "the product's arguments (pkg/cni/sriov.go) become -v 10 --log_dir /var/log/sriovdp --alsologtostderr --resource-prefix kubevirt.io --config-file ...; /var/log/sriovdp is made",
			Got:       args("--log-dir=sriovdp", "--log-level=10", "--resource-prefix=kubevirt.io", "--config-file=/etc/pcidp/config.json"),
			Want:      `prefix kubevirt.io, config /etc/pcidp/config.json, -v 10, log dir "sriovdp" made true`,
			Deviation: "the stand-in logs to stderr only and writes no glog files into the directory"},
		{Src: entry + ", " + mainGo, What: "no arguments: sriovdp's defaults, prefix intel.com and /etc/pcidp/config.json",
			Got: args(), Want: `prefix intel.com, config /etc/pcidp/config.json, -v 10, log dir "" made false`},
		{Src: entry, What: "an empty --resource-prefix= or --config-file= is not passed on: the defaults stay",
			Got: args("--resource-prefix=", "--config-file="), Want: `prefix intel.com, config /etc/pcidp/config.json, -v 10, log dir "" made false`},
		{Src: entry, What: "VALUE is the field after the first '=' (awk -F=): --config-file=/a=b is /a",
			Got: args("--config-file=/a=b"), Want: `prefix intel.com, config /a, -v 10, log dir "" made false`},
		{Src: "golang/glog glog_flags.go@v1.2.5", What: "--log-level=abc: glog's -v takes an integer; the flag package exits 2",
			Got: args("--log-level=abc"), Want: `exit 2: invalid value "abc" for flag -v: parse error`},
		{Src: entry + ", golang/glog glog_flags.go@v1.2.5", What: "--log-level= (empty): -v swallows the next word, --logtostderr, and fails the same way",
			Got: args("--log-level="), Want: `exit 2: invalid value "" for flag -v: parse error`},
		{Src: entry, What: "--log-level 10 as two arguments: 10 is an unknown parameter, exit 1",
			Got: args("--log-level", "10"), Want: `exit 1: ERROR: unknown parameter "10"`},
		{Src: entry, What: "an unknown parameter exits 1",
			Got: args("--no-such=1"), Want: `exit 1: ERROR: unknown parameter "--no-such"`},
		{Src: entry, What: "-h prints the usage and exits 0", Got: args("-h"), Want: "usage, exit 0"},
		{Src: entry, What: "--use-cdi: upstream writes CDI specs and answers Allocate with CDI annotations",
			Got: args("--use-cdi"), Want: "exit 1: --use-cdi is not supported by the stand-in device plugin",
			Deviation: "refused: the stand-in has no CDI; the product never passes it"},
	})
}

func TestConformanceConfig(t *testing.T) {
	root := fakeTree(t)
	cfg := func(c string) func(*testing.T) string {
		return func(t *testing.T) string { return outcome(t, root, c, fakeNet{}) }
	}
	withSelectorObjs := `{"resourceList":[{"resourceName":"r","selectors":{},"selectorObjs":1}]}`
	conformance.Check(t, []row{
		{Src: "pkg/cni/dpconfig.go devicePluginConfig; " + mgr, What: "the product's vfio-pci pool (deviceType netDevice, drivers vfio-pci, pfNames of the leased PFs)",
			Got:  cfg(`{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice","selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd0","rgd1"]}]}]}`),
			Want: "serves kubevirt.io/sriov_net " + ids(pf0vfio, pf1)},
		// Without drivers every bound VF of the PF joins, whatever its
		// driver (pkg/factory/factory.go FilterBySelector skips an empty list).
		{Src: "pkg/cni/dpconfig.go devicePluginConfig; " + mgr + "; " + dp + "pkg/factory/factory.go" + at, What: "the product's netdevice pool (pfNames only, no drivers list)",
			Got:  cfg(`{"resourceList":[{"resourceName":"sriov_net","resourcePrefix":"kubevirt.io","deviceType":"netDevice","selectors":[{"pfNames":["rgd0"]}]}]}`),
			Want: "serves kubevirt.io/sriov_net " + ids(pf0vfio, pf0iavf)},
		{Src: mainGo, What: "no config file: logged, main returns (status 0), nothing served",
			Got: cfg(""), Want: "exit 0: error getting resources from file error reading file $DIR/config.json, open $DIR/config.json: no such file or directory"},
		{Src: mgr + " readConfig", What: "not JSON: the whole file fails, status 0",
			Got: cfg(`{"resourceList":`), Want: "exit 0: error getting resources from file error unmarshalling raw bytes unexpected end of JSON input please make sure the config is in json format"},
		{Src: mainGo, What: "an empty resourceList: \"no resource configuration; exiting\", status 0",
			Got: cfg(`{"resourceList":[]}`), Want: "exit 0: no resource configuration; exiting"},
		{Src: mgr + " readConfig; " + types, What: "an unknown deviceType fails the whole file, status 0",
			Got: cfg(`{"resourceList":[{"resourceName":"r","deviceType":"gpu","selectors":{}}]}`), Want: `exit 0: error getting resources from file unsupported deviceType:  "gpu"`},
		{Src: mgr + " readConfig", What: "unknown keys, in the pool and in a selector (auxTypes is not a netDevice selector), are ignored by json.Unmarshal",
			Got:  cfg(`{"resourceList":[{"resourceName":"r","noSuchKey":1,"selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd1"],"auxTypes":["sf"],"typo":true}]}],"other":2}`),
			Want: "serves kubevirt.io/r " + pf1},
		{Src: types + " (encoding/json)", What: "keys match case-insensitively: Drivers, PFNAMES",
			Got: cfg(pool1("r", `[{"Drivers":["vfio-pci"],"PFNAMES":["rgd1"]}]`)), Want: "serves kubevirt.io/r " + pf1},
		{Src: types, What: "a \"selectorObjs\" key that is not a list (ResourceConfig.SelectorObjs has no tag) fails the file, status 0",
			Got: cfg(withSelectorObjs), Want: "exit 0: error getting resources from file error unmarshalling raw bytes json: cannot unmarshal number into Go struct field resourceConfig.resourceList.SelectorObjs of type []interface {} please make sure the config is in json format",
			Deviation: "the type name in the message is the stand-in's"},
		{Src: fact + " parseObjectOrSlice", What: "no selectors: upstream dereferences the nil *json.RawMessage and panics (status 2)",
			Got: cfg(`{"resourceList":[{"resourceName":"r"}]}`), Want: `exit 2: panic (as upstream): resource "r" has no selectors: upstream dereferences the nil *json.RawMessage (pkg/factory/factory.go parseObjectOrSlice)`},
		{Src: fact + " parseObjectOrSlice", What: "\"selectors\": null is the same nil pointer: a panic",
			Got: cfg(pool1("r", `null`)), Want: `exit 2: panic (as upstream): resource "r" has no selectors: upstream dereferences the nil *json.RawMessage (pkg/factory/factory.go parseObjectOrSlice)`},
		{Src: fact + " parseObjectOrSlice; " + prov + " ValidConfig", What: "\"selectors\": [null] decodes to a nil selector, dereferenced by ValidConfig: a panic",
			Got: cfg(pool1("r", `[null]`)), Want: `exit 2: panic (as upstream): resource "r" has a null selector: upstream dereferences it (netdevice/netDeviceProvider.go ValidConfig)`},
		{Src: fact + " parseObjectOrSlice; " + mgr, What: "\"selectors\": [] is left out with a warning; the other pools are served",
			Got: cfg(`{"resourceList":[{"resourceName":"empty","selectors":[]},{"resourceName":"r","selectors":{"pfNames":["rgd1"]}}]}`), Want: "serves kubevirt.io/r " + pf1},
		{Src: fact + " parseObjectOrSlice", What: "selectors that are neither an object nor a list of objects: the pool is left out",
			Got:  cfg(`{"resourceList":[{"resourceName":"bad","selectors":"x"},{"resourceName":"bad2","selectors":[{"drivers":"vfio-pci"}]},{"resourceName":"r","selectors":{"pfNames":["rgd1"]}}]}`),
			Want: "serves kubevirt.io/r " + pf1},
		{Src: fact + " parseObjectOrSlice", What: "one selector object instead of a list",
			Got: cfg(pool1("r", `{"drivers":["vfio-pci"],"pfNames":["rgd1"]}`)), Want: "serves kubevirt.io/r " + pf1},
		{Src: mgr + " validConfigs; " + utils + " ValidResourceName", What: "resourceName with a '.' (^[a-zA-Z0-9_-]+$): glog.Fatalf, status 2 (the product's config refuses it, pkg/config/validate.go)",
			Got: cfg(pool1("a.b", `{}`)), Want: `exit 2: Exiting.. one or more invalid configuration(s) given: resource name "a.b" contains invalid characters`},
		{Src: mgr + " validConfigs", What: "an empty resourceName: status 2",
			Got: cfg(pool1("", `{}`)), Want: `exit 2: Exiting.. one or more invalid configuration(s) given: resource name "" contains invalid characters`},
		{Src: mgr + " validConfigs", What: "two pools with the same <prefix>/<name>, one through --resource-prefix: status 2",
			Got:  cfg(`{"resourceList":[{"resourceName":"r","selectors":{}},{"resourceName":"r","resourcePrefix":"kubevirt.io","selectors":{}}]}`),
			Want: `exit 2: Exiting.. one or more invalid configuration(s) given: resource name "kubevirt.io/r" already exists`},
		{Src: mgr + " validConfigs", What: "the same name under two prefixes: two pools",
			Got:  cfg(`{"resourceList":[{"resourceName":"r","selectors":{"pfNames":["rgd1"]}},{"resourceName":"r","resourcePrefix":"example.com","selectors":{"pfNames":["rgd0"]}}]}`),
			Want: "serves example.com/r " + ids(pf0vfio, pf0iavf) + "; kubevirt.io/r " + pf1},
		{Src: prov + " ValidConfig", What: "isRdma with vdpaType: status 2",
			Got: cfg(pool1("r", `[{"isRdma":true,"vdpaType":"vhost"}]`)), Want: "exit 2: Exiting.. one or more invalid configuration(s) given: invalid config: VdpaType and IsRdma are mutually exclusive options"},
		{Src: mgr + " initServers", What: "pools that select nothing get no server; with none at all the plugin waits for a signal",
			Got: cfg(pool1("r", `{"pfNames":["nosuch"]}`)), Want: "serves nothing, until signalled"},
		{Src: mgr + "; " + types + " SupportedDevices", What: "deviceType accelerator or auxNetDevice: upstream serves class 0x12 functions or auxiliary devices",
			Got:       cfg(`{"resourceList":[{"resourceName":"r","deviceType":"accelerator","selectors":{}}]}`),
			Want:      `exit 1: resource r: deviceType "accelerator" is not supported by the stand-in device plugin (netDevice only)`,
			Deviation: "refused: the rig has neither; the product writes netDevice pools only"},
		{Src: dp + "pkg/netdevice/pciNetDevice.go" + at, What: "needVhostNet: upstream adds /dev/vhost-net to the pool's device specs",
			Got: cfg(pool1("r", `[{"needVhostNet":true}]`)), Want: "exit 1: resource r: selectors[0]: needVhostNet is not supported by the stand-in device plugin",
			Deviation: "refused: the stand-in does not serve /dev/vhost-net; the product never sets it"},
	})
}

func TestConformanceSelection(t *testing.T) {
	root := fakeTree(t)
	sel1 := func(selectors string, nv netView) func(*testing.T) string {
		return func(t *testing.T) string { return outcome(t, root, pool1("r", selectors), nv) }
	}
	// Functions changed for single rows, each on its own tree.
	unbound := func(t *testing.T) string {
		k := fakeKernel(t)
		kstore(t, "unbind "+vf(0, 3), k.StoreUnbind(sysfs.X710.VFDriver, []byte(vf(0, 3)+"\n")))
		return outcome(t, writeTree(t, k), pool1("r", `{"pfNames":["rgd0#2-3"]}`), fakeNet{})
	}
	// The fake kernel has none of these drivers (no NIC it stands in for
	// binds them): the written copy of its tree is edited to show one.
	boundTo := func(driver string) func(*testing.T) string {
		return func(t *testing.T) string {
			r := fakeTree(t)
			link := filepath.Join(sysfs.Tree{Root: r}.DeviceDir(vf(1, 0)), "driver")
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../../bus/pci/drivers/"+driver, link); err != nil {
				t.Fatal(err)
			}
			return outcome(t, r, pool1("r", `{"pfNames":["rgd1"]}`), fakeNet{})
		}
	}
	numa := func(excludeTopology bool) func(*testing.T) string {
		return func(t *testing.T) string {
			c := fmt.Sprintf(`{"resourceList":[{"resourceName":"r","excludeTopology":%v,"selectors":{"pciAddresses":["%s"]}}]}`, excludeTopology, vf(0, 0))
			list, err := readConfig([]byte(c), nowarn)
			if err != nil {
				t.Fatal(err)
			}
			d := selectPools(root, list, fakeNet{}, nowarn)[list[0]][0]
			return fmt.Sprintf("NUMA node %d", d.numaNode)
		}
	}
	conformance.Check(t, []row{
		{Src: sel + " driverSelector", What: "drivers: the bound driver's name, exactly",
			Got: sel1(`{"drivers":["vfio-pci"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + ids(pf0vfio, pf1)},
		{Src: sel + "; jaypipes/ghw pkg/pci/pci_linux.go@v0.19.1 parseModaliasData", What: "vendors and devices are ghw's lower-case hex ids without 0x",
			Got: sel1(`{"vendors":["8086"],"devices":["154c"],"drivers":["iavf"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + pf0iavf,
			Deviation: "ghw reads the ids from modalias, which the rig's sysfs lacks; the stand-in reads the vendor and device files the kernel fills from the same configuration space"},
		{Src: sel, What: "vendors written with 0x match nothing (strings compared as written)",
			Got: sel1(`{"vendors":["0x8086"]}`, fakeNet{}), Want: "serves nothing, until signalled"},
		{Src: sel + " getItem, isSelected", What: "pfNames: the PF name case-insensitively, then #<index>,<index>",
			Got: sel1(`{"pfNames":["RGD0#1,3"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + ids(vf(0, 1), vf(0, 3))},
		{Src: sel + " isSelected", What: "pfNames range #a-b, both ends included",
			Got: sel1(`{"pfNames":["rgd1#1-2"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + ids(vf(1, 1), vf(1, 2))},
		{Src: sel + " getItem", What: "only the first entry naming a PF counts",
			Got: sel1(`{"pfNames":["rgd1#0","rgd1#2"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + vf(1, 0)},
		{Src: sel + " isSelected", What: "a malformed index selects nothing, an index matched before it still selects",
			Got: sel1(`{"pfNames":["rgd1#0,x","rgd0#x-2"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + vf(1, 0)},
		{Src: sel + " rootDevices", What: "rootDevices: the PF's PCI address, with the same index syntax",
			Got: sel1(`{"rootDevices":["`+sysfs.PFBDF(1)+`#0"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + vf(1, 0)},
		{Src: sel + " pciAddressSelector", What: "pciAddresses",
			Got: sel1(`{"pciAddresses":["`+vf(1, 2)+`","`+vf(0, 0)+`"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + ids(vf(0, 0), vf(1, 2))},
		{Src: prov + " AddTargetDevices", What: "a PF with VFs is never a device; one without VFs is (its own PF name is empty)",
			Got: sel1(`{"drivers":["i40e"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + sysfs.PFBDF(2)},
		{Src: sel + " pciAddressSelector; " + prov + " AddTargetDevices", What: "pciAddresses takes a PF without VFs by its address (a fleet's pool of whole PFs); a PF with VFs, not even by it",
			Got: sel1(`{"pciAddresses":["`+sysfs.PFBDF(2)+`","`+sysfs.PFBDF(0)+`"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + sysfs.PFBDF(2)},
		{Src: prov + " AddTargetDevices; " + utils + " HasDefaultRoute", What: "a function whose netdev carries an IPv4 default route is left out",
			Got: sel1(`{"drivers":["i40e"]}`, fakeNet{routed: map[string]bool{"rgd2": true}}), Want: "serves nothing, until signalled"},
		{Src: mgr + " initServers", What: "selectors are OR'ed in order and a device goes to the first pool that takes it; empty pools are left out",
			Got: cfg3(root), Want: "serves kubevirt.io/all " + ids(pf0vfio, pf0iavf) + "; kubevirt.io/vfio " + pf1},
		{Src: dp + "pkg/netdevice/pciNetDevice.go" + at + " (utils.GetDriverName)", What: "a VF without a driver joins no pool",
			Got: unbound, Want: "serves kubevirt.io/r " + vf(0, 2)},
		{Src: genNet + " NewGenNetDevice (GetLinkAttrs)", What: "a function whose netdev, or without one its PF's, netlink does not find joins no pool",
			Got: sel1(`{"drivers":["vfio-pci"]}`, fakeNet{missing: map[string]bool{"rgd1": true}}), Want: "serves kubevirt.io/r " + pf0vfio},
		{Src: genNet + "; " + sel + " linkTypeSelector", What: "linkTypes: the netlink encapsulation of the netdev, or of the PF's (ether here)",
			Got: sel1(`{"linkTypes":["ether"],"pfNames":["rgd1"]}`, fakeNet{}), Want: "serves kubevirt.io/r " + pf1},
		{Src: sel + " linkTypeSelector", What: "linkTypes infiniband on ethernet links selects nothing",
			Got: sel1(`{"linkTypes":["infiniband"]}`, fakeNet{}), Want: "serves nothing, until signalled"},
		{Src: prov + " GetFilteredDevices; " + dp + "pkg/resources/ddpSelector.go" + at + ", pKeySelector.go", What: "isRdma, ddpProfiles, pKeys and vdpaType select only functions with RDMA, a DDP profile, an InfiniBand pKey or a vDPA device",
			Got: func(t *testing.T) string {
				return outcome(t, root, `{"resourceList":[
					{"resourceName":"a","selectors":[{"isRdma":true}]},
					{"resourceName":"b","selectors":[{"ddpProfiles":["GTPv1-C/U IPv4/IPv6 payload"]}]},
					{"resourceName":"c","selectors":[{"pKeys":["0x1"]}]},
					{"resourceName":"d","selectors":[{"vdpaType":"vhost"}]}]}`, fakeNet{})
			}, Want: "serves nothing, until signalled",
			Deviation: "the stand-in's functions have none of these, as a NIC without them; it cannot serve a function that has them"},
		{Src: dp + "pkg/factory/factory.go" + at + " GetDefaultInfoProvider", What: "a selected function bound to igb_uio gets the uio info provider (/dev/uioN)",
			Got: boundTo("igb_uio"), Want: "exit 1: resource r: " + vf(1, 0) + " is bound to igb_uio, whose device specs (/dev/uioN) the stand-in device plugin does not implement",
			Deviation: "refused rather than served without its device; the rig binds no VF to uio"},
		{Src: dp + "pkg/factory/factory.go" + at + " GetDefaultInfoProvider", What: "uio_pci_generic has no info provider of its own: served like a netdev VF",
			Got: boundTo("uio_pci_generic"), Want: "serves kubevirt.io/r " + pf1},
		{Src: dp + "pkg/devices/host.go" + at + " (utils.GetDevNode)", What: "the NUMA node from numa_node", Got: numa(false), Want: "NUMA node 0"},
		{Src: dp + "pkg/devices/host.go" + at, What: "excludeTopology: no NUMA node", Got: numa(true), Want: "NUMA node -1"},
		{Src: utils + " sysBusPci; test/standin/rigsysfs", What: "where sysfs is: upstream reads /sys/bus/pci/devices",
			Got: func(t *testing.T) string {
				got, err := rigsysfs.FindIn([]string{filepath.Join(root, "missing"), root, "/sys"})
				return fmt.Sprint(got == root, err)
			}, Want: "true <nil>",
			Deviation: "the stand-in reads the first of /var/log/sriov-lane-rig/sys, /hostroot/var/log/sriov-lane-rig/sys and /sys with bus/pci/devices (rigsysfs.Find): the product mounts no /sys into the pod and the rig's fake sysfs is mounted in the node there"},
	})
}

func cfg3(root string) func(*testing.T) string {
	return func(t *testing.T) string {
		return outcome(t, root, `{"resourceList":[
			{"resourceName":"all","selectors":[{"pfNames":["rgd0#2-3"]},{"pfNames":["rgd0"]}]},
			{"resourceName":"vfio","selectors":[{"drivers":["vfio-pci"]}]},
			{"resourceName":"none","selectors":[{"pfNames":["nosuch"]}]}]}`, fakeNet{})
	}
}

func allocate(t *testing.T, c pluginapi.DevicePluginClient, bdfs ...string) (*pluginapi.ContainerAllocateResponse, error) {
	t.Helper()
	resp, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: bdfs}}})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0], nil
}

func isNullLike(p string) bool {
	var null, st unix.Stat_t
	if unix.Stat("/dev/null", &null) != nil || unix.Stat(p, &st) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == null.Rdev
}

// TestConformanceServing runs the plugin once on the fake tree in the
// plugin-watcher mode with two vfio-pci pools and a netdevice pool, and
// asks it what kubelet asks.
func TestConformanceServing(t *testing.T) {
	requireRoot(t, "Allocate makes character devices for vfio-pci VFs")
	root := fakeTree(t)
	o := testOptions(t, root)
	if err := os.MkdirAll(o.registryDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := start(t, o, `{"resourceList":[
	 {"resourceName":"sriov_vfio","selectors":[{"drivers":["vfio-pci"],"pfNames":["rgd0"]}]},
	 {"resourceName":"sriov_vfio1","selectors":[{"pfNames":["rgd1#0"]}]},
	 {"resourceName":"sriov_net","resourcePrefix":"example.com","excludeTopology":true,"selectors":{"drivers":["iavf"],"pfNames":["rgd0"]},
	  "additionalInfo":{"*":{"a":"1","b":"2"},"`+vf(0, 3)+`":{"b":"3"}}}]}`)
	f.servers(t)
	vfioSock := filepath.Join(o.registryDir, "kubevirt.io_sriov_vfio.sock")
	conn := dial(t, vfioSock)
	vfioDP, reg := pluginapi.NewDevicePluginClient(conn), registerapi.NewRegistrationClient(conn)
	vfio1DP := pluginapi.NewDevicePluginClient(dial(t, filepath.Join(o.registryDir, "kubevirt.io_sriov_vfio1.sock")))
	netDP := pluginapi.NewDevicePluginClient(dial(t, filepath.Join(o.registryDir, "example.com_sriov_net.sock")))
	group := func(bdf string) string {
		g, _ := filepath.EvalSymlinks(filepath.Join(root, "bus/pci/devices", bdf, "iommu_group"))
		return filepath.Base(g)
	}
	// The rows name the groups of VFs 0 and 1 of rgd0 G0 and G1, and
	// that of VF 0 of rgd1 G.
	groups := strings.NewReplacer("/"+group(vf(0, 0)), "/G0", "/"+group(vf(0, 1)), "/G1", "/"+group(vf(1, 0)), "/G")

	conformance.Check(t, []row{
		{Src: server + " NewResourceServer; " + utils + " DetectPluginWatchMode", What: "plugins_registry exists (the product's pod mounts it): one socket <prefix>_<name>.sock there per pool, none in device-plugins",
			Got: func(t *testing.T) string {
				return fmt.Sprint(dirNames(o.registryDir), " ", dirNames(o.pluginDir))
			}, Want: "[example.com_sriov_net.sock kubevirt.io_sriov_vfio.sock kubevirt.io_sriov_vfio1.sock] []"},
		{Src: server + " GetInfo", What: "kubelet's plugin watcher asks GetInfo",
			Got: func(t *testing.T) string {
				info, err := reg.GetInfo(context.Background(), &registerapi.InfoRequest{})
				if err != nil {
					return err.Error()
				}
				return fmt.Sprint(info.Type, " ", info.Name, " ", info.Endpoint == vfioSock, " ", info.SupportedVersions)
			}, Want: "DevicePlugin kubevirt.io/sriov_vfio true [v1alpha1 v1beta1]"},
		{Src: server + " ListAndWatch; " + dp + "pkg/devices/api.go" + at, What: "ListAndWatch: the pool's devices, Healthy, with their NUMA node",
			Got: func(t *testing.T) string {
				stream, err := vfioDP.ListAndWatch(context.Background(), &pluginapi.Empty{})
				if err != nil {
					return err.Error()
				}
				l, err := stream.Recv()
				if err != nil {
					return err.Error()
				}
				var out []string
				for _, d := range l.Devices {
					var nodes []int64
					for _, n := range d.Topology.GetNodes() {
						nodes = append(nodes, n.ID)
					}
					out = append(out, fmt.Sprint(d.ID, " ", d.Health, " NUMA ", nodes))
				}
				sort.Strings(out)
				return strings.Join(out, "; ")
			}, Want: vf(0, 0) + " Healthy NUMA [0]; " + vf(0, 1) + " Healthy NUMA [0]"},
		{Src: vfio + "; " + pool + " GetDeviceSpecs; " + utils + " GetVFIODeviceFile", What: "Allocate of vfio-pci VFs: device specs /dev/vfio/vfio and /dev/vfio/<iommu group>, each host path once, rw, no mounts",
			Got: func(t *testing.T) string {
				c, err := allocate(t, vfioDP, vf(0, 0), vf(0, 1))
				if err != nil {
					return err.Error()
				}
				var out []string
				for _, d := range c.Devices {
					host := "host " + strings.TrimPrefix(d.HostPath, o.vfioDevDir)
					if !isNullLike(d.HostPath) {
						host += " (not a /dev/null look-alike)"
					}
					out = append(out, d.ContainerPath+" <- "+host+" "+d.Permissions)
				}
				return groups.Replace(strings.Join(out, "; ")) + fmt.Sprintf(" | mounts %d", len(c.Mounts))
			},
			Want:      "/dev/vfio/vfio <- host /vfio rw; /dev/vfio/G0 <- host /G0 rw; /dev/vfio/G1 <- host /G1 rw | mounts 0",
			Deviation: "upstream's host paths are the node's /dev/vfio/vfio and /dev/vfio/<group>. The rig's /dev/vfio holds regular files and containerd refuses a device spec whose host path is not a device, so the stand-in makes character devices with /dev/null's numbers under /var/lib/kubelet/device-plugins/sriov-lane-standin/vfio and returns those as host paths; the pod sees upstream's container paths, and opening them opens /dev/null. So nothing on the rig needs the product's /dev/vfio mount into the agents (pkg/provider/clusterconfig.go): a real VFIO group reaching the pod through it is proved by the kernel tier (a real kernel in QEMU), not here"},
		{Src: vfio + "; " + server + " Allocate", What: "_INFO: the first Allocate of a vfio-pci VF has the vfio mount only, a later one dev-mount too (Allocate asks the envs before the specs that set it)",
			Got: func(t *testing.T) string {
				var out []string
				for range 2 {
					c, err := allocate(t, vfio1DP, vf(1, 0))
					if err != nil {
						return err.Error()
					}
					out = append(out, c.Envs["PCIDEVICE_KUBEVIRT_IO_SRIOV_VFIO1"]+" "+groups.Replace(c.Envs["PCIDEVICE_KUBEVIRT_IO_SRIOV_VFIO1_INFO"]))
				}
				return strings.Join(out, " | ")
			},
			Want: vf(1, 0) + ` {"` + vf(1, 0) + `":{"generic":{"deviceID":"` + vf(1, 0) + `"},"vfio":{"mount":"/dev/vfio/vfio"}}} | ` +
				vf(1, 0) + ` {"` + vf(1, 0) + `":{"generic":{"deviceID":"` + vf(1, 0) + `"},"vfio":{"dev-mount":"/dev/vfio/G","mount":"/dev/vfio/vfio"}}}`},
		{Src: stub + " GetEnvs", What: "PCIDEVICE_<PREFIX>_<NAME>: the allocated addresses, comma-separated; only '.' becomes '_'",
			Got: func(t *testing.T) string {
				return envName("kubevirt.io", "sriov_net") + " " + envName("my-vendor.example.io", "sriov-net")
			}, Want: "PCIDEVICE_KUBEVIRT_IO_SRIOV_NET PCIDEVICE_MY-VENDOR_EXAMPLE_IO_SRIOV-NET"},
		{Src: pool + " StoreDeviceInfoFile; " + nad, What: "device info: <prefix>-<name>-<address>-device.json, {type pci, version 1.1.0, pci-address}, mode 0444",
			Got: func(t *testing.T) string {
				if _, err := allocate(t, vfioDP, vf(0, 0)); err != nil {
					return err.Error()
				}
				p := filepath.Join(o.devInfoDir, "kubevirt.io-sriov_vfio-"+vf(0, 0)+"-device.json")
				b, err := os.ReadFile(p)
				if err != nil {
					return err.Error()
				}
				fi, _ := os.Stat(p)
				return fmt.Sprintf("%s %v", b, fi.Mode().Perm())
			}, Want: `{"type":"pci","version":"1.1.0","pci":{"pci-address":"` + vf(0, 0) + `"}} -r--r--r--`},
		{Src: pool + " GetDeviceSpecs; " + dp + "pkg/infoprovider/extraInfoProvider.go" + at, What: "a netdevice pool: no device specs, generic and extra info (\"*\", then the address's own)",
			Got: func(t *testing.T) string {
				c, err := allocate(t, netDP, vf(0, 3))
				if err != nil {
					return err.Error()
				}
				var info map[string]map[string]map[string]string
				_ = json.Unmarshal([]byte(c.Envs["PCIDEVICE_EXAMPLE_COM_SRIOV_NET_INFO"]), &info)
				return fmt.Sprintf("specs %d %s %v", len(c.Devices), c.Envs["PCIDEVICE_EXAMPLE_COM_SRIOV_NET"], info)
			}, Want: "specs 0 " + vf(0, 3) + " map[" + vf(0, 3) + ":map[extra:map[a:1 b:3] generic:map[deviceID:" + vf(0, 3) + "]]]"},
		{Src: pool + " StoreDeviceInfoFile", What: "Allocate of an address not in the pool fails",
			Got: func(t *testing.T) string {
				_, err := allocate(t, vfioDP, vf(0, 2))
				return fmt.Sprint(err != nil && strings.Contains(err.Error(), "Only pciNetDevices are supported"))
			}, Want: "true"},
		{Src: server + " Stop; " + pool + " CleanDeviceInfoFile", What: "on SIGTERM the sockets and the pools' device info files go",
			Got: func(t *testing.T) string {
				f.cancel()
				err := <-f.done
				f.done <- err // for Cleanup
				return fmt.Sprintf("%v %v %v", err, dirNames(o.registryDir), dirNames(o.devInfoDir))
			}, Want: "<nil> [] []"},
	})
}

// TestConformanceRegistration covers the deprecated registration (no
// plugins_registry directory), its restart and its failure, and a
// registration kubelet refuses.
func TestConformanceRegistration(t *testing.T) {
	deprecated := func(t *testing.T) string {
		defer func(d time.Duration) { watchEvery = d }(watchEvery)
		watchEvery = 50 * time.Millisecond
		o := testOptions(t, fakeTree(t))
		k := &kubelet{reqs: make(chan *pluginapi.RegisterRequest, 4)}
		ln, err := net.Listen("unix", filepath.Join(o.pluginDir, "kubelet.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ks := grpc.NewServer()
		pluginapi.RegisterRegistrationServer(ks, k)
		go func() { _ = ks.Serve(ln) }()
		defer ks.Stop()
		f := start(t, o, pool1("sriov_net", `[{"drivers":["vfio-pci"]}]`))
		f.servers(t)
		var out []string
		for i := range 2 {
			select {
			case r := <-k.reqs:
				out = append(out, fmt.Sprint(r.Version, " ", r.Endpoint, " ", r.ResourceName, " ", r.Options))
			case <-time.After(bound.Scaled(10 * time.Second)):
				out = append(out, "no registration")
			}
			if i == 0 { // a restarting kubelet removes every socket in device-plugins
				_ = os.Remove(filepath.Join(o.pluginDir, "kubevirt.io_sriov_net.sock"))
			}
		}
		return strings.Join(out, "; ")
	}
	noKubelet := func(t *testing.T) string {
		return outcome(t, fakeTree(t), pool1("r", `{}`), fakeNet{}) // outcome makes plugins_registry
	}
	noKubeletDeprecated := func(t *testing.T) string {
		o := testOptions(t, fakeTree(t))
		if err := os.WriteFile(o.configFile, []byte(pool1("r", `{"drivers":["vfio-pci"]}`)), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(30*time.Second))
		defer cancel()
		err := run(ctx, o, nil)
		return fmt.Sprintf("exit %d", exitCode(err))
	}
	refused := func(t *testing.T) string {
		o := testOptions(t, fakeTree(t))
		if err := os.MkdirAll(o.registryDir, 0o755); err != nil {
			t.Fatal(err)
		}
		f := start(t, o, pool1("r", `{"drivers":["vfio-pci"]}`))
		f.servers(t)
		sock := filepath.Join(o.registryDir, "kubevirt.io_r.sock")
		conn := dial(t, sock)
		// The server may stop before its answer leaves, as upstream's
		// (it stops the gRPC server in the handler).
		_, _ = registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: false, Error: "no"})
		deadline := time.Now().Add(bound.Scaled(10 * time.Second))
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(time.Second))
			_, err := pluginapi.NewDevicePluginClient(dial(t, sock)).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
			cancel()
			if err != nil {
				return "server stopped"
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "still serving"
	}
	conformance.Check(t, []row{
		{Src: server + " register, Watch", What: "no plugins_registry: Register on device-plugins/kubelet.sock, and again when kubelet removes the socket",
			Got: deprecated, Want: "v1beta1 kubevirt.io_sriov_net.sock kubevirt.io/sriov_net <nil>; v1beta1 kubevirt.io_sriov_net.sock kubevirt.io/sriov_net <nil>"},
		{Src: server + " Start", What: "no kubelet.sock to register with: glog.Fatal, status 2", Got: noKubeletDeprecated, Want: "exit 2"},
		{Src: server + " Start", What: "the plugin-watcher mode registers nothing itself: it serves without kubelet", Got: noKubelet, Want: "serves kubevirt.io/r " + ids(pf0vfio, pf0iavf, pf1, sysfs.PFBDF(2))},
		{Src: server + " NotifyRegistrationStatus", What: "kubelet reports the registration failed: the pool's server stops", Got: refused, Want: "server stopped"},
	})
}
