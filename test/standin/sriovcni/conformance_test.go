package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/standin/conformance"
)

// Conformance: each input the product passes, or could pass, to sriov-cni
// (the image's arguments, the netconf Multus hands it from a
// NetworkAttachmentDefinition with the device plugin's deviceID, CNI_ARGS,
// the CNI environment, what sysfs and netlink show it), with what v2.10.0
// does with it, read at the tag (git show v2.10.0:PATH), and the stand-in
// doing exactly that. A row with a deviation is where the stand-in must
// differ (no VF table, the rig's sysfs): it says how and why.
type row = conformance.Row

const (
	scni    = "k8snetworkplumbingwg/sriov-cni "
	at      = "@v2.10.0"
	cmds    = scni + "pkg/cnicommands/cni.go" + at
	config  = scni + "pkg/config/config.go" + at
	sriovGo = scni + "pkg/sriov/sriov.go" + at
	utilsGo = scni + "pkg/utils/utils.go" + at
	alloc   = scni + "pkg/utils/pci_allocator.go" + at
	entry   = scni + "images/entrypoint.sh" + at
	skelGo  = "containernetworking/cni pkg/skel/skel.go@v1.3.0"
)

// cniError is the error a plugin prints on stdout.
func cniError(out string) string {
	var e struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Code == 0 {
		return "no error: " + out
	}
	return fmt.Sprintf("code %d: %s", e.Code, e.Msg)
}

func smokeConf(deviceID string, extra string) string {
	return `{"cniVersion":"0.3.1","name":"sriov-lane-smoke","type":"sriov","deviceID":"` + deviceID + `"` + extra + `}`
}

func TestConformanceEntrypoint(t *testing.T) {
	sh := []string{"sh"}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		sh = []string{"/bin/busybox", "sh"} // the stand-in image's shell
	}
	dir := t.TempDir()
	bin, dst := filepath.Join(dir, "sriov"), filepath.Join(dir, "cni-bin")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) func(*testing.T) string {
		return func(t *testing.T) string {
			cmd := exec.Command(sh[0], append(append(sh[1:], "entrypoint.sh"), args...)...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			res := fmt.Sprintf("exit %d", code)
			if fi, err := os.Stat(filepath.Join(dst, "sriov")); err == nil {
				res += fmt.Sprintf(", copied %v", fi.Mode().Perm())
				os.Remove(filepath.Join(dst, "sriov"))
			}
			if strings.Contains(string(out), "--cni-bin-dir=/host/opt/cni/bin") {
				res += ", usage"
			}
			return res
		}
	}
	conformance.Check(t, []row{
		{Src: entry, What: "the product's DaemonSet passes no arguments: copy /usr/bin/sriov into /host/opt/cni/bin, then sleep (--no-sleep here: exit 0)",
			Got: run("--cni-bin-dir="+dst, "--sriov-bin-file="+bin, "--no-sleep"), Want: "exit 0, copied -rwxr-xr-x"},
		{Src: entry, What: "an unknown parameter: usage, exit 1", Got: run("--no-such", "--no-sleep"), Want: "exit 1, usage"},
		{Src: entry, What: "a --cni-bin-dir that does not exist: exit 1",
			Got: run("--cni-bin-dir="+filepath.Join(dir, "missing"), "--sriov-bin-file="+bin, "--no-sleep"), Want: "exit 1"},
		{Src: entry, What: "a --sriov-bin-file that does not exist: exit 1",
			Got: run("--cni-bin-dir="+dst, "--sriov-bin-file="+filepath.Join(dir, "missing"), "--no-sleep"), Want: "exit 1"},
		{Src: entry, What: "-h: usage with the defaults, exit 0", Got: run("-h"), Want: "exit 0, usage"},
	})
}

func TestConformanceCNIProtocol(t *testing.T) {
	r := newTree(t)
	env := func(cmd string, more ...string) []string {
		return append([]string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=net1"}, more...)
	}
	run := func(e []string, conf string) func(*testing.T) string {
		return func(t *testing.T) string {
			out, code := r.exec(t, e, conf)
			if code == 0 {
				return "exit 0: " + strings.TrimSpace(out)
			}
			return fmt.Sprintf("exit %d, %s", code, cniError(out))
		}
	}
	conformance.Check(t, []row{
		{Src: scni + "cmd/sriov/main.go" + at + "; containernetworking/cni pkg/version/plugin.go@v1.3.0", What: "VERSION: the CNI library's version.All",
			Got: run([]string{"CNI_COMMAND=VERSION"}, ""), Want: `exit 0: {"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`},
		{Src: skelGo + " checkVersionAndCall", What: "a cniVersion the library does not support: code 1, incompatible CNI versions",
			Got: run(env("ADD"), `{"cniVersion":"2.0.0","name":"n","type":"sriov","deviceID":"`+r.vf+`"}`), Want: "exit 1, code 1: incompatible CNI versions"},
		{Src: skelGo + " validateConfig", What: "no network name: code 7",
			Got: run(env("ADD"), `{"cniVersion":"0.3.1","type":"sriov","deviceID":"`+r.vf+`"}`), Want: "exit 1, code 7: missing network name"},
		{Src: skelGo + " getCmdArgsFromEnv", What: "ADD without CNI_IFNAME: code 4",
			Got: run([]string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/x"}, smokeConf(r.vf, "")), Want: "exit 1, code 4: required env variables [CNI_IFNAME] missing"},
		{Src: skelGo + " pluginMain", What: "CHECK on a 0.3.1 conf: refused by the library",
			Got: run(env("CHECK"), smokeConf(r.vf, "")), Want: "exit 1, code 1: config version does not allow CHECK"},
		{Src: cmds + " CmdCheck", What: "CHECK on a 1.0.0 conf: nothing is checked",
			Got: run(env("CHECK"), `{"cniVersion":"1.0.0","name":"n","type":"sriov"}`), Want: "exit 0: "},
		{Src: cmds + " CmdAdd; " + config + " SetLogging", What: "a conf that does not decode into NetConf (vlan as a string): ADD fails before anything",
			Got: run(env("ADD"), smokeConf(r.vf, `,"vlan":"100"`)), Want: "exit 1, code 999: SetLogging(): failed to load netconf: json: cannot unmarshal string into Go struct field netConf.SriovNetConf.vlan of type int", Deviation: "the struct name in the message is the stand-in's"},
		{Src: cmds + " CmdDel; " + config + " SetLogging", What: "the same conf on DEL fails too, even with nothing cached",
			Got: run(env("DEL"), smokeConf(r.vf, `,"vlan":"100"`)), Want: "exit 1, code 999: SetLogging(): failed to load netconf: json: cannot unmarshal string into Go struct field netConf.SriovNetConf.vlan of type int", Deviation: "the struct name in the message is the stand-in's"},
		{Src: cmds + " CmdDel", What: "DEL with nothing cached (never added, or DEL already ran) succeeds",
			Got: run(env("DEL"), smokeConf(r.vf, "")), Want: "exit 0: "},
	})
}

func TestConformanceLoadConf(t *testing.T) {
	r := newTree(t)
	// In a process of its own each time: ADD keeps the VF's lock until
	// the process ends, as upstream's.
	addArgs := func(args, conf string) func(*testing.T) string {
		return func(t *testing.T) string {
			out, _ := r.exec(t, []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/nonexistent/netns", "CNI_IFNAME=net1", "CNI_ARGS=" + args}, conf)
			return strings.TrimPrefix(strings.ReplaceAll(cniError(out), r.sysfs, "$SYS"), "code 999: ")
		}
	}
	add := func(conf string) func(*testing.T) string { return addArgs("", conf) }
	const past = "failed to open netns \"/nonexistent/netns\": failed to Statfs \"/nonexistent/netns\": no such file or directory"
	allocated := func(t *testing.T) string {
		p := r.plugin()
		if err := p.saveAllocatedPCI(r.vf, "/proc/self/ns/net"); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p.allocPath(r.vf))
		return add(smokeConf(r.vf, ""))(t)
	}
	stale := func(t *testing.T) string {
		p := r.plugin()
		if err := p.saveAllocatedPCI(r.vf, "/var/run/netns/gone"); err != nil {
			t.Fatal(err)
		}
		got := add(smokeConf(r.vf, ""))(t)
		_, err := os.Stat(p.allocPath(r.vf))
		return got + fmt.Sprintf(" (allocation file left: %v)", err == nil)
	}
	conformance.Check(t, []row{
		{Src: config + " LoadConf", What: "no deviceID (Multus fills it from the device plugin's allocation): refused",
			Got: add(`{"cniVersion":"0.3.1","name":"n","type":"sriov"}`), Want: "SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required"},
		{Src: config + " getVfInfo; " + utilsGo + " GetPfName", What: "a deviceID sysfs does not know: refused",
			Got: add(smokeConf("0000:5c:11.0", "")), Want: `SRIOV-CNI failed to load netconf: LoadConf(): failed to get VF information: "lstat $SYS/bus/pci/devices/0000:5c:11.0/physfn/net: no such file or directory"`},
		{Src: config + " LoadConf", What: "a VF with neither a netdev nor a DPDK driver: refused",
			Got: add(smokeConf(r.bareVF, "")), Want: "SRIOV-CNI failed to load netconf: LoadConf(): the VF " + r.bareVF + " does not have a interface name or a dpdk driver"},
		{Src: config + " LoadConf", What: "vlanQoS without vlan: refused", Got: add(smokeConf(r.vf, `,"vlanQoS":1`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): vlan id must be configured to set vlan QoS to a non-nil value"},
		{Src: config + " LoadConf", What: "vlanProto without vlan: refused", Got: add(smokeConf(r.vf, `,"vlanProto":"802.1q"`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): vlan id must be configured to set vlan proto to a non-nil value"},
		{Src: config + " LoadConf", What: "vlan 4095: refused", Got: add(smokeConf(r.vf, `,"vlan":4095`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): vlan id 4095 invalid: value must be in the range 0-4094"},
		{Src: config + " LoadConf", What: "vlanQoS 8: refused", Got: add(smokeConf(r.vf, `,"vlan":1,"vlanQoS":8`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): vlan QoS PCP 8 invalid: value must be in the range 0-7"},
		{Src: config + " LoadConf", What: "vlanQoS 1 on vlan 0: refused", Got: add(smokeConf(r.vf, `,"vlan":0,"vlanQoS":1`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): non-zero vlan id must be configured to set vlan QoS to a non-zero value"},
		{Src: config + " LoadConf", What: "vlanProto 802.1AD (lower-cased) on vlan 0: refused", Got: add(smokeConf(r.vf, `,"vlan":0,"vlanProto":"802.1AD"`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): non-zero vlan id must be configured to set vlan proto 802.1ad"},
		{Src: config + " LoadConf", What: "an unknown vlanProto: refused", Got: add(smokeConf(r.vf, `,"vlan":5,"vlanProto":"qinq"`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): vlan Proto qinq invalid: value must be '802.1Q' or '802.1ad'"},
		{Src: config + " LoadConf", What: "an unknown link_state: refused", Got: add(smokeConf(r.vf, `,"link_state":"up"`)),
			Want: "SRIOV-CNI failed to load netconf: LoadConf(): invalid link_state value: up"},
		{Src: config + " LoadConf; " + alloc + " IsAllocated", What: "a VF whose allocation file names a netns that exists: refused",
			Got: allocated, Want: "SRIOV-CNI failed to load netconf: pci address " + r.vf + " is already allocated"},
		{Src: alloc + " IsAllocated", What: "an allocation file naming a netns that is gone is removed, and ADD goes on",
			Got: stale, Want: past + " (allocation file left: false)"},
		{Src: cmds + " getEnvArgs (types.LoadArgs)", What: "CNI_ARGS with an unknown key and no IgnoreUnknown: refused",
			Got: addArgs("FOO=bar", smokeConf(r.vf, "")), Want: "SRIOV-CNI failed to parse args: ARGS: unknown args [\"FOO=bar\"]"},
		{Src: cmds + " getEnvArgs", What: "CNI_ARGS as Multus passes them (IgnoreUnknown=1;K8S_POD_NAMESPACE=...): accepted",
			Got: addArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u", smokeConf(r.vf, "")), Want: past},
	})
}

func TestConformanceApplyVFConfig(t *testing.T) {
	zero, vlan, rate := 0, 100, 10
	apply := func(n netConf) func(*testing.T) string {
		return func(*testing.T) string { return fmt.Sprint(n.applyVFConfig()) }
	}
	const why = "the VF table is the PF's: a stand-in PF is a veth and has none, so the stand-in sets nothing through it and refuses what only it could do"
	conformance.Check(t, []row{
		{Src: sriovGo + " ApplyVFConfig", What: "vlan 0 (upstream sets vlan 0, no tag, through the PF)", Got: apply(netConf{SriovNetConf: SriovNetConf{Vlan: &zero}}), Want: "<nil>", Deviation: why},
		{Src: sriovGo + " ApplyVFConfig", What: "vlan 100", Got: apply(netConf{SriovNetConf: SriovNetConf{Vlan: &vlan}}),
			Want: "sriov (stand-in): vlan 100 is not supported: the rig's PF is a veth with no VF table to tag with (only vlan 0)", Deviation: why},
		{Src: sriovGo + " ApplyVFConfig; " + utilsGo + " SetVFHardwareMAC", What: "a MAC that does not parse",
			Got: apply(netConf{SriovNetConf: SriovNetConf{MAC: "zz"}}), Want: "failed to set MAC address to zz: failed to parse MAC address zz: address zz: invalid MAC address"},
		{Src: utilsGo + " SetVFHardwareMAC", What: "a MAC in another notation: the table's MAC read back prints with colons and never matches",
			Got: apply(netConf{SriovNetConf: SriovNetConf{MAC: "02-00-00-00-00-01"}}), Want: "failed to set MAC address to 02-00-00-00-00-01: hardware mac address is different from requested one"},
		{Src: utilsGo + " SetVFHardwareMAC", What: "a MAC for a VF with a netdev (upstream sets it in the VF table and on the netdev)",
			Got: apply(netConf{SriovNetConf: SriovNetConf{MAC: "02:00:00:00:00:01"}}), Want: "<nil>", Deviation: why + "; the MAC is set on the netdev, as upstream's SetupVF also does"},
		{Src: sriovGo + " ApplyVFConfig", What: "a MAC for a VF on vfio-pci (only the VF table can set it)",
			Got:  apply(netConf{SriovNetConf: SriovNetConf{MAC: "02:00:00:00:00:01", DPDKMode: true, DeviceID: "0000:5c:10.1"}}),
			Want: "sriov (stand-in): a MAC for VF 0000:5c:10.1 bound to a DPDK driver is not supported: the rig's PF is a veth with no VF table to set its administrative MAC in", Deviation: why},
		{Src: sriovGo + " ApplyVFConfig", What: "min_tx_rate and max_tx_rate 0 (no limit)", Got: apply(netConf{SriovNetConf: SriovNetConf{MinTxRate: &zero, MaxTxRate: &zero}}), Want: "<nil>", Deviation: why},
		{Src: sriovGo + " ApplyVFConfig", What: "max_tx_rate 10", Got: apply(netConf{SriovNetConf: SriovNetConf{MaxTxRate: &rate}}),
			Want: "sriov (stand-in): min_tx_rate and max_tx_rate other than 0 are not supported: the rig's PF is a veth with no VF table to limit", Deviation: why},
		{Src: sriovGo + " ApplyVFConfig", What: "spoofchk and trust (on or off)", Got: apply(netConf{SriovNetConf: SriovNetConf{SpoofChk: "on", Trust: "off"}}), Want: "<nil>",
			Deviation: why + "; a veth neither drops spoofed frames nor restricts an untrusted VF"},
		{Src: sriovGo + " ApplyVFConfig", What: "link_state auto or enable", Got: apply(netConf{SriovNetConf: SriovNetConf{LinkState: "enable"}}), Want: "<nil>", Deviation: why + "; the VF netdev has carrier"},
		{Src: sriovGo + " ApplyVFConfig", What: "link_state disable", Got: apply(netConf{SriovNetConf: SriovNetConf{LinkState: "disable"}}),
			Want: "sriov (stand-in): link_state disable is not supported: the rig's PF is a veth with no VF table to force the link down", Deviation: why},
		{Src: sriovGo + " FillOriginalVfInfo (getVfInfo)", What: "the VF's state before ADD, from the PF's VF table",
			Got: func(*testing.T) string {
				s := vfState{HostIFName: "v", Vlan: 7, SpoofChk: true, AdminMAC: "x"}
				s.fillUnset()
				return fmt.Sprintf("%+v", s)
			}, Want: "{HostIFName:v SpoofChk:false Trust:false AdminMAC:00:00:00:00:00:00 EffectiveMAC: Vlan:0 VlanQoS:0 VlanProto:0 MinTxRate:0 MaxTxRate:0 LinkState:0 MTU:0}",
			Deviation: "upstream finds no entry for a veth PF and fails (\"failed to find vf\"); the stand-in reads an entry with nothing set, which is only cached and restored"},
	})
}

// TestConformanceAddDel runs the plugin in a node netns on VFs of the tree,
// as Multus does.
func TestConformanceAddDel(t *testing.T) {
	r := newRig(t)
	pod, node := r.handle(t, r.pod), r.handle(t, r.node)
	cache := filepath.Join(r.dir, "cache")
	netdevConf := smokeConf(r.vf, `,"ipam":{"type":"scni-ipam"}`)
	inPod := func() string {
		l, err := pod.LinkByName("net1")
		if err != nil {
			return "no net1 in the pod"
		}
		up := l.Attrs().Flags&1 != 0
		return fmt.Sprintf("net1 %s up=%v %v", l.Attrs().HardwareAddr, up, addrs(t, pod, l))
	}
	inNode := func() string {
		l, err := node.LinkByName(r.vfName)
		if err != nil {
			return "no VF netdev in the node"
		}
		return fmt.Sprintf("VF netdev %s, own MAC %v, down %v, %v", l.Attrs().Name, l.Attrs().HardwareAddr.String() == r.vfMAC, l.Attrs().Flags&1 == 0, addrs(t, node, l))
	}
	files := func(ctr, ifName, vf string) string {
		_, c := os.Stat(filepath.Join(cache, ctr+"-"+ifName))
		_, a := os.Stat(filepath.Join(cache, "pci", vf))
		return fmt.Sprintf("cache %v, allocation %v", c == nil, a == nil)
	}
	// vfBack puts the VF left in the pod back in the node as a DEL would
	// have (down, its name and MAC again) and drops its allocation, for
	// the rows after.
	vfBack := func(t *testing.T) {
		if l, err := pod.LinkByName("net1"); err == nil {
			nodeNs := r.nsFd(t, r.node)
			_ = pod.LinkSetDown(l)
			_ = pod.LinkSetName(l, r.vfName)
			_ = pod.LinkSetHardwareAddr(l, mustMAC(t, r.vfMAC))
			_ = pod.LinkSetNsFd(l, nodeNs)
		}
		_ = os.Remove(filepath.Join(cache, "pci", r.vf))
	}
	// hidePF renames the PF in the node's netns, so that a lookup by its
	// name fails, until the returned func (deferred too) names it back.
	hidePF := func(t *testing.T) (back func()) {
		pf, err := node.LinkByName(r.pfName)
		if err != nil {
			t.Fatal(err)
		}
		if err := node.LinkSetName(pf, r.pfName+"y"); err != nil {
			t.Fatal(err)
		}
		return func() { _ = node.LinkSetName(pf, r.pfName) }
	}
	result := func(out string) string {
		var res struct {
			CNIVersion string `json:"cniVersion"`
			Interfaces []map[string]any
			IPs        []struct {
				Address   string
				Interface *int
			}
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.CNIVersion == "" {
			return cniError(out)
		}
		s := res.CNIVersion + " " + fmt.Sprint(res.Interfaces)
		for _, ip := range res.IPs {
			s += fmt.Sprintf(" ip %s on %v", ip.Address, *ip.Interface)
		}
		return s
	}
	const mac = "02:00:00:5c:10:00"
	sandbox := "/var/run/netns/" + r.pod
	conformance.Check(t, []row{
		{Src: cmds + " CmdAdd; " + sriovGo + " SetupVF", What: "ADD of a netdev VF with the MAC in runtimeConfig (upper-case) and IPAM: moved into the pod, named CNI_IFNAME, lower-cased MAC, up, addressed; the result names it with the sandbox, its MAC and MTU, the IPs on interface 0",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c1", smokeConf(r.vf, `,"runtimeConfig":{"mac":"`+strings.ToUpper(mac)+`"},"ipam":{"type":"scni-ipam"}`))
				return result(out) + " | " + inPod() + " | " + files("c1", "net1", r.vf)
			},
			Want: "0.3.1 [map[mac:" + mac + " name:net1 sandbox:" + sandbox + "]] ip 10.56.217.5/24 on 0 | net1 " + mac + " up=true [10.56.217.5/24] | cache true, allocation true"},
		{Src: alloc + " IsAllocated", What: "ADD of the same VF while its pod's netns lives: refused",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c2", netdevConf)
				return cniError(out)
			}, Want: "code 999: SRIOV-CNI failed to load netconf: pci address " + r.vf + " is already allocated"},
		{Src: cmds + " CmdDel; " + sriovGo + " ReleaseVF", What: "DEL: IPAM released, the VF down, renamed back, its own MAC again, into the node's netns; cache and allocation gone",
			Got: func(t *testing.T) string {
				out, ok := r.cni(t, "DEL", "c1", netdevConf)
				if !ok {
					return cniError(out)
				}
				return inNode() + " | " + inPod() + " | " + files("c1", "net1", r.vf) + " | " + r.ipamCalls()
			}, Want: "VF netdev " + r.vfName + ", own MAC true, down true, [] | no net1 in the pod | cache false, allocation false | ADD c1, DEL c1"},
		{Src: cmds + " CmdDel", What: "DEL again: nothing cached, success",
			Got: func(t *testing.T) string {
				out, ok := r.cni(t, "DEL", "c1", netdevConf)
				return fmt.Sprint(ok, " ", strings.TrimSpace(out))
			}, Want: "true "},
		{Src: cmds + " getEnvArgs", What: "the MAC from CNI_ARGS (MAC=...), when runtimeConfig has none",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c3", smokeConf(r.vf, ""), "CNI_ARGS=IgnoreUnknown=1;MAC=02:00:00:5c:10:03")
				defer r.cni(t, "DEL", "c3", smokeConf(r.vf, ""))
				return result(out)
			}, Want: "0.3.1 [map[mac:02:00:00:5c:10:03 name:net1 sandbox:" + sandbox + "]]"},
		{Src: cmds + " CmdAdd", What: "a prevResult in the conf is ignored: the result is the plugin's own",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c4", smokeConf(r.vf, `,"prevResult":{"cniVersion":"0.3.1","interfaces":[{"name":"eth0"}],"ips":[{"version":"4","address":"10.1.2.3/24"}]}`))
				defer r.cni(t, "DEL", "c4", smokeConf(r.vf, ""))
				return result(out)
			}, Want: "0.3.1 [map[mac:" + r.vfMAC + " name:net1 sandbox:" + sandbox + "]]"},
		{Src: cmds + " CmdAdd", What: "IPAM that returns no address: ADD fails, IPAM is released and the VF comes back to the node",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c5", smokeConf(r.vf, `,"ipam":{"type":"scni-noip"}`))
				return cniError(out) + " | " + inNode() + " | " + files("c5", "net1", r.vf)
			}, Want: "code 999: IPAM plugin returned missing IP config | VF netdev " + r.vfName + ", own MAC true, down true, [] | cache false, allocation false"},
		{Src: cmds + " CmdAdd", What: "the product's vfio-pci smoke conf (no IPAM): the VF is only reported, no MAC, nothing moved (and at 0.3.1 no MTU)",
			Got: func(t *testing.T) string {
				out, _ := r.cni(t, "ADD", "c6", smokeConf(r.dpdkVF, ""))
				links, err := nsutil.LinkList(pod)
				if err != nil {
					return "pod links: " + err.Error()
				}
				return result(out) + fmt.Sprintf(" | pod links %d | ", len(links)) + files("c6", "net1", r.dpdkVF)
			}, Want: "0.3.1 [map[name:net1 sandbox:" + sandbox + "]] | pod links 1 | cache true, allocation true"},
		{Src: cmds + " CmdDel (DPDKMode is json:\"-\")", What: "DEL of that VF: DPDK mode is not cached, so DEL looks for net1 in the pod and fails once; the cache goes anyway and the retry succeeds; the allocation file stays",
			Got: func(t *testing.T) string {
				out, ok := r.cni(t, "DEL", "c6", smokeConf(r.dpdkVF, ""))
				first := fmt.Sprint(ok, " ", cniError(out))
				_, ok2 := r.cni(t, "DEL", "c6", smokeConf(r.dpdkVF, ""))
				_ = os.Remove(filepath.Join(cache, "pci", r.dpdkVF))
				return first + " | retry " + fmt.Sprint(ok2)
			}, Want: "false code 999: failed to get netlink device with name net1: \"Link not found\" | retry true"},
		{Src: cmds + " CmdDel", What: "DEL with CNI_NETNS empty (kubernetes#35240): IPAM released, success, cache gone, the VF stays where it is",
			Got: func(t *testing.T) string {
				if out, ok := r.cni(t, "ADD", "c7", netdevConf); !ok {
					return "ADD: " + cniError(out)
				}
				out, ok := r.cni(t, "DEL", "c7", netdevConf, "CNI_NETNS=")
				res := fmt.Sprint(ok, " ", strings.TrimSpace(out), " | ", inPod(), " | ", files("c7", "net1", r.vf))
				// Put it back as a DEL with the netns would have.
				vfBack(t)
				return res
			}, Want: "true  | net1 " + r.vfMAC + " up=true [10.56.217.5/24] | cache false, allocation true"},
		{Src: cmds + " CmdDel (ResetVFConfig)", What: "DEL when the PF is no longer in the node's netns: ResetVFConfig's lookup fails, the cache goes anyway (shadowed err), the retry succeeds",
			Got: func(t *testing.T) string {
				if out, ok := r.cni(t, "ADD", "c8", smokeConf(r.vf, "")); !ok {
					return "ADD: " + cniError(out)
				}
				pfBack := hidePF(t)
				defer pfBack()
				out, ok := r.cni(t, "DEL", "c8", smokeConf(r.vf, ""))
				res := fmt.Sprint(ok, " ", cniError(out), " | ", files("c8", "net1", r.vf))
				_, ok2 := r.cni(t, "DEL", "c8", smokeConf(r.vf, ""))
				// The VF is still in the pod: bring it back for the rows after.
				pfBack()
				vfBack(t)
				return res + " | retry " + fmt.Sprint(ok2)
			}, Want: "false code 999: cmdDel() error reseting VF: \"failed to lookup master \\\"" + r.pfName + "\\\": Link not found\" | cache false, allocation true | retry true"},
		{Src: cmds + " CmdAdd (FillOriginalVfInfo)", What: "ADD when the PF is not in the node's netns: refused before anything moves",
			Got: func(t *testing.T) string {
				defer hidePF(t)()
				out, _ := r.cni(t, "ADD", "c9", smokeConf(r.vf, ""))
				return cniError(out) + " | " + inNode()
			}, Want: "code 999: failed to get original vf information: failed to lookup master \"" + r.pfName + "\": Link not found | VF netdev " + r.vfName + ", own MAC true, down true, []"},
		{Src: cmds + " CmdAdd", What: "after ADD upstream sends gratuitous ARPs and unsolicited neighbour advertisements for the IPAM addresses, best-effort",
			Got: func(*testing.T) string { return "none sent" }, Want: "none sent",
			Deviation: "the stand-in sends none: nothing on the rig keeps a neighbour cache for a reused address"},
		{Src: utilsGo + " SysBusPci, NetDirectory; test/standin/rigsysfs", What: "where sysfs is: upstream reads /sys/bus/pci/devices and /sys/class/net",
			Got: func(*testing.T) string { return fmt.Sprint(r.plugin().sysfs == r.sysfs) }, Want: "true",
			Deviation: "the stand-in reads the first of /var/log/sriov-lane-rig/sys, /hostroot/var/log/sriov-lane-rig/sys and /sys with bus/pci/devices (rigsysfs.Find): Multus runs it chrooted into the node, where the rig mounts its fake sysfs there"},
	})
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// nsFd is an fd of the named netns, open for the test.
func (r *rig) nsFd(t *testing.T, name string) int {
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return int(h)
}
