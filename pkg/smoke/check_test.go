package smoke

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	utilexec "k8s.io/client-go/util/exec"
)

// exited is how remotecommand reports a command that exited non-zero.
func exited(code int) error {
	return utilexec.CodeExitError{Err: errors.New("command terminated with non-zero exit code"), Code: code}
}

// wantCheck asserts err is a CheckError of check whose message holds every
// fragment (what was expected and found), or that err is nil without
// fragments.
func wantCheck(t *testing.T, err error, check string, fragments ...string) {
	t.Helper()
	if len(fragments) == 0 {
		if err != nil {
			t.Fatalf("unexpected failure: %v", err)
		}
		return
	}
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CheckError, got %v", err)
	}
	if ce.Check != check {
		t.Errorf("check %q, want %q", ce.Check, check)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%q lacks %q", err.Error(), f)
		}
	}
}

func TestPCIDeviceEnvName(t *testing.T) {
	for _, c := range []struct{ prefix, name, want string }{
		{"kubevirt.io", "sriov_net", "PCIDEVICE_KUBEVIRT_IO_SRIOV_NET"},
		// pool_stub.go@v3.11.0 replaces only '.'.
		{"intel.com", "dpdk-nic.1", "PCIDEVICE_INTEL_COM_DPDK-NIC_1"},
	} {
		if got := PCIDeviceEnvName(c.prefix, c.name); got != c.want {
			t.Errorf("PCIDeviceEnvName(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
}

const envVar = "PCIDEVICE_KUBEVIRT_IO_SRIOV_NET"

func TestCheckPCIDeviceEnv(t *testing.T) {
	base := "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nHOSTNAME=sriov-lane-smoke\nHOME=/root\n"
	cmd := []string{"env"}
	for _, c := range []struct {
		name     string
		out      CmdOutput
		wantDev  PCIDevice
		wantLine string
		fails    []string
	}{
		{
			name:     "one address",
			out:      CmdOutput{Cmd: cmd, Stdout: base + envVar + "=0000:40:02.1\n"},
			wantDev:  PCIDevice{Env: envVar, Address: "0000:40:02.1"},
			wantLine: envVar + "=0000:40:02.1",
		},
		{
			name: "address with vfio info",
			out: CmdOutput{Cmd: cmd, Stdout: base + envVar + "=0000:3b:02.6\n" + envVar +
				`_INFO={"0000:3b:02.6":{"generic":{"deviceID":"0000:3b:02.6"},"vfio":{"dev-mount":"/dev/vfio/169","mount":"/dev/vfio/vfio"}}}` + "\n"},
			wantDev:  PCIDevice{Env: envVar, Address: "0000:3b:02.6", VFIODev: "/dev/vfio/169", VFIOFrom: envVar + "_INFO"},
			wantLine: envVar + "=0000:3b:02.6",
		},
		{
			name:     "malformed info is only a missing hint",
			out:      CmdOutput{Cmd: cmd, Stdout: envVar + "=0000:3b:02.6\n" + envVar + "_INFO={not json\n"},
			wantDev:  PCIDevice{Env: envVar, Address: "0000:3b:02.6"},
			wantLine: envVar + "=0000:3b:02.6",
		},
		{
			name:  "no PCIDEVICE variable",
			out:   CmdOutput{Cmd: cmd, Stdout: base},
			fails: []string{envVar + " holding one PCI address", "no PCIDEVICE_* variable"},
		},
		{
			name:  "another resource's variable",
			out:   CmdOutput{Cmd: cmd, Stdout: base + "PCIDEVICE_KUBEVIRT_IO_OTHER=0000:40:02.1\n"},
			fails: []string{"no " + envVar, "PCIDEVICE_KUBEVIRT_IO_OTHER=0000:40:02.1"},
		},
		{
			name:  "empty",
			out:   CmdOutput{Cmd: cmd, Stdout: base + envVar + "=\n"},
			fails: []string{envVar + " empty"},
		},
		{
			name:  "two addresses",
			out:   CmdOutput{Cmd: cmd, Stdout: envVar + "=0000:40:02.1,0000:40:02.2\n"},
			fails: []string{"0000:40:02.1,0000:40:02.2: 2 addresses"},
		},
		{
			name:  "not a PCI address",
			out:   CmdOutput{Cmd: cmd, Stdout: envVar + "=vf-3\n"},
			fails: []string{"=vf-3: not a PCI address"},
		},
		{
			name:  "exec failed",
			out:   CmdOutput{Cmd: cmd, Stderr: "env: not found", Err: exited(127)},
			fails: []string{"`env` exited 127: env: not found"},
		},
		{
			name:  "exec could not start",
			out:   CmdOutput{Cmd: cmd, Err: errors.New("container not found")},
			fails: []string{"`env` could not run: container not found"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev, line, err := checkPCIDeviceEnv(c.out, envVar)
			wantCheck(t, err, CheckPCIDeviceEnv, c.fails...)
			if err == nil && (dev != c.wantDev || line != c.wantLine) {
				t.Errorf("got %+v %q, want %+v %q", dev, line, c.wantDev, c.wantLine)
			}
		})
	}
}

func TestCheckVFIODevices(t *testing.T) {
	cmd := []string{"ls", "-l", "/dev/vfio/"}
	ctl := "crw-rw-rw-    1 root     root       10, 196 Dec  1 10:00 vfio\n"
	group := func(n string) string { return "crw-rw-rw-    1 root     root      244,   0 Dec  1 10:00 " + n + "\n" }
	withInfo := PCIDevice{Env: envVar, Address: "0000:40:02.1", VFIODev: "/dev/vfio/12", VFIOFrom: envVar + "_INFO"}
	noInfo := PCIDevice{Env: envVar, Address: "0000:40:02.1"}
	for _, c := range []struct {
		name     string
		out      CmdOutput
		dev      PCIDevice
		wantLine string
		fails    []string
	}{
		{
			name:     "group named by info",
			out:      CmdOutput{Cmd: cmd, Stdout: "total 0\n" + group("12") + ctl},
			dev:      withInfo,
			wantLine: "/dev/vfio/12 and /dev/vfio/vfio are char devices (" + envVar + "_INFO names /dev/vfio/12 for 0000:40:02.1)",
		},
		{
			name:     "group without info",
			out:      CmdOutput{Cmd: cmd, Stdout: ctl + group("169")},
			dev:      noInfo,
			wantLine: "/dev/vfio/169 and /dev/vfio/vfio are char devices",
		},
		{
			name:  "no /dev/vfio",
			out:   CmdOutput{Cmd: cmd, Stderr: "ls: /dev/vfio/: No such file or directory\n", Err: exited(1)},
			dev:   noInfo,
			fails: []string{"char devices /dev/vfio/<group> and /dev/vfio/vfio", "`ls -l /dev/vfio/` exited 1: ls: /dev/vfio/: No such file or directory"},
		},
		{
			name:  "only the container device",
			out:   CmdOutput{Cmd: cmd, Stdout: ctl},
			dev:   noInfo,
			fails: []string{"char devices: /dev/vfio/vfio"},
		},
		{
			name:  "group is a regular file",
			out:   CmdOutput{Cmd: cmd, Stdout: ctl + "-rw-r--r--    1 root     root             0 Dec  1 10:00 12\n"},
			dev:   withInfo,
			fails: []string{"/dev/vfio/12 (named for 0000:40:02.1", "not char devices: /dev/vfio/12 (type '-')"},
		},
		{
			name:  "another group than info names",
			out:   CmdOutput{Cmd: cmd, Stdout: ctl + group("13")},
			dev:   withInfo,
			fails: []string{"char devices /dev/vfio/12 (named for 0000:40:02.1 by " + envVar + "_INFO)", "char devices: /dev/vfio/13, /dev/vfio/vfio"},
		},
		{
			name:  "no container device",
			out:   CmdOutput{Cmd: cmd, Stdout: group("12")},
			dev:   withInfo,
			fails: []string{"and /dev/vfio/vfio", "char devices: /dev/vfio/12"},
		},
		{
			name:  "empty directory",
			out:   CmdOutput{Cmd: cmd, Stdout: "total 0\n"},
			dev:   noInfo,
			fails: []string{"char devices: none"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			line, err := checkVFIODevices(c.out, c.dev)
			wantCheck(t, err, CheckVFIODevice, c.fails...)
			if err == nil && line != c.wantLine {
				t.Errorf("line %q, want %q", line, c.wantLine)
			}
		})
	}
}

// netStatus is a network-status annotation as Multus v4.3.0 writes it:
// the default network, then the smoke network (json.MarshalIndent of each
// NetworkStatus, nadutils.SetNetworkStatus).
const netStatus = `[{
    "name": "cbr0",
    "interface": "eth0",
    "ips": [
        "10.42.1.7"
    ],
    "mac": "2a:58:0a:2a:01:07",
    "default": true,
    "dns": {},
    "gateway": [
        "10.42.1.1"
    ]
},{
    "name": "default/sriov-lane-smoke",
    "interface": "net1",
    "ips": [
        "10.56.217.2"
    ],
    "mac": "ae:5d:49:0c:3a:11",
    "dns": {},
    "device-info": {
        "type": "pci",
        "version": "1.1.0",
        "pci": {
            "pci-address": "0000:40:02.1",
            "pf-pci-address": "0000:40:00.0"
        }
    }
}]`

func TestCheckNetworkStatus(t *testing.T) {
	subnet := netip.MustParsePrefix(Subnet)
	dev := PCIDevice{Env: envVar, Address: "0000:40:02.1"}
	const network = "default/sriov-lane-smoke"
	edit := func(from, to string) string { return strings.Replace(netStatus, from, to, 1) }
	for _, c := range []struct {
		name, annotation string
		wantLine         string
		fails            []string
	}{
		{
			name:       "listed with VF",
			annotation: netStatus,
			wantLine:   "default/sriov-lane-smoke on net1, mac ae:5d:49:0c:3a:11, ips 10.56.217.2, device-info pci-address 0000:40:02.1 (= " + envVar + ")",
		},
		{
			name:       "no annotation",
			annotation: "",
			fails:      []string{"listing default/sriov-lane-smoke with an interface, an address in 10.56.217.0/24 and device-info pci-address 0000:40:02.1", "no k8s.v1.cni.cncf.io/network-status annotation"},
		},
		{
			name:       "not JSON",
			annotation: "net1",
			fails:      []string{"not a network-status list"},
		},
		{
			name:       "network not listed",
			annotation: edit(`"default/sriov-lane-smoke"`, `"default/other"`),
			fails:      []string{`networks cbr0 on "eth0", default/other on "net1"`},
		},
		{
			name:       "no interface",
			annotation: edit(`"interface": "net1",`, ``),
			fails:      []string{"default/sriov-lane-smoke without an interface"},
		},
		{
			name:       "no device-info",
			annotation: `[{"name":"default/sriov-lane-smoke","interface":"net1","ips":["10.56.217.2"]}]`,
			fails:      []string{"default/sriov-lane-smoke on net1 without device-info"},
		},
		{
			name:       "device-info not pci",
			annotation: edit(`"type": "pci"`, `"type": "vdpa"`),
			fails:      []string{`device-info type "vdpa"`},
		},
		{
			name:       "another VF",
			annotation: edit(`"pci-address": "0000:40:02.1"`, `"pci-address": "0000:40:02.3"`),
			fails:      []string{`device-info pci-address "0000:40:02.3"`},
		},
		{
			name:       "address outside the smoke subnet",
			annotation: edit(`"10.56.217.2"`, `"10.42.1.8"`),
			fails:      []string{"default/sriov-lane-smoke on net1 with ips [10.42.1.8]"},
		},
		{
			name:       "no address",
			annotation: edit(`"10.56.217.2"`, ``),
			fails:      []string{"with ips []"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, line, err := checkNetworkStatus(c.annotation, network, dev, subnet)
			wantCheck(t, err, CheckNetworkStatus, c.fails...)
			if err == nil && (line != c.wantLine || st.Interface != "net1") {
				t.Errorf("got %+v %q, want net1 %q", st, line, c.wantLine)
			}
		})
	}
}

func TestCheckPodInterface(t *testing.T) {
	st := nadv1.NetworkStatus{Name: "default/sriov-lane-smoke", Interface: "net1", Mac: "ae:5d:49:0c:3a:11", IPs: []string{"10.56.217.2"}}
	catCmd := []string{"cat", "/sys/class/net/net1/address"}
	ipCmd := []string{"ip", "-o", "addr", "show", "dev", "net1"}
	mac := CmdOutput{Cmd: catCmd, Stdout: "ae:5d:49:0c:3a:11\n"}
	// busybox 1.37 `ip -o addr show dev net1`.
	addrs := CmdOutput{Cmd: ipCmd, Stdout: "3: net1    inet 10.56.217.2/24 brd 10.56.217.255 scope global net1\\       valid_lft forever preferred_lft forever\n" +
		"3: net1    inet6 fe80::ac5d:49ff:fe0c:3a11/64 scope link \\       valid_lft forever preferred_lft forever\n"}
	for _, c := range []struct {
		name        string
		mac, addrs  CmdOutput
		wantLine    string
		fails       []string
		noStatusMac bool
	}{
		{
			name: "present", mac: mac, addrs: addrs,
			wantLine: "net1 in the pod's netns: mac ae:5d:49:0c:3a:11, addresses 10.56.217.2/24,fe80::ac5d:49ff:fe0c:3a11/64",
		},
		{
			name: "annotation without mac", mac: mac, addrs: addrs, noStatusMac: true,
			wantLine: "net1 in the pod's netns: mac ae:5d:49:0c:3a:11, addresses 10.56.217.2/24,fe80::ac5d:49ff:fe0c:3a11/64",
		},
		{
			name: "interface missing",
			mac:  CmdOutput{Cmd: catCmd, Stderr: "cat: can't open '/sys/class/net/net1/address': No such file or directory\n", Err: exited(1)},
			fails: []string{"interface net1 in the pod's network namespace with mac ae:5d:49:0c:3a:11 and addresses 10.56.217.2",
				"`cat /sys/class/net/net1/address` exited 1: cat: can't open '/sys/class/net/net1/address': No such file or directory"},
		},
		{
			name:  "another mac",
			mac:   CmdOutput{Cmd: catCmd, Stdout: "02:00:00:00:00:01\n"},
			addrs: addrs,
			fails: []string{`net1 with mac "02:00:00:00:00:01"`},
		},
		{
			name:  "address missing",
			mac:   mac,
			addrs: CmdOutput{Cmd: ipCmd, Stdout: "3: net1    inet6 fe80::ac5d:49ff:fe0c:3a11/64 scope link \\       valid_lft forever preferred_lft forever\n"},
			fails: []string{"net1 with mac ae:5d:49:0c:3a:11 and addresses fe80::ac5d:49ff:fe0c:3a11/64"},
		},
		{
			name:  "no addresses",
			mac:   mac,
			addrs: CmdOutput{Cmd: ipCmd},
			fails: []string{"and addresses none"},
		},
		{
			name:  "another interface's address does not count",
			mac:   mac,
			addrs: CmdOutput{Cmd: ipCmd, Stdout: "2: eth0    inet 10.56.217.2/24 scope global eth0\\ valid_lft forever preferred_lft forever\n"},
			fails: []string{"and addresses none"},
		},
		{
			name:  "ip failed",
			mac:   mac,
			addrs: CmdOutput{Cmd: ipCmd, Stderr: "ip: can't find device 'net1'\n", Err: exited(1)},
			fails: []string{"`ip -o addr show dev net1` exited 1: ip: can't find device 'net1'"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := st
			if c.noStatusMac {
				s.Mac = ""
			}
			line, err := checkPodInterface(s, c.mac, c.addrs)
			wantCheck(t, err, CheckPodInterface, c.fails...)
			if err == nil && line != c.wantLine {
				t.Errorf("line %q, want %q", line, c.wantLine)
			}
		})
	}
}
