package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// The test binary is also the plugin: run with asPlugin set, it is
// exactly main.
const asPlugin = "SRIOV_CNI_STANDIN_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPlugin) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// require skips (or, under SRIOV_LANE_TEST_STRICT=1 as in `make test`,
// fails) when a prerequisite is missing: test/testutil's rule, without the
// Docker client that package brings into this module.
func require(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("SRIOV_LANE_TEST_STRICT") == "1" {
		t.Fatalf("prerequisite missing under SRIOV_LANE_TEST_STRICT=1: %s", what)
	}
	t.Skip(what)
}

func TestEntrypointCopiesTheBinaryAsUpstreamsImageDoes(t *testing.T) {
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
	run := func(args ...string) (string, error) {
		out, err := exec.Command(sh[0], append(append(sh[1:], "entrypoint.sh"), args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("--cni-bin-dir="+dst, "--sriov-bin-file="+bin, "--no-sleep"); err != nil {
		t.Fatalf("entrypoint: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(dst, "sriov")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("copied binary: %v %v", fi, err)
	}
	for _, bad := range [][]string{
		{"--no-such", "--no-sleep"},
		{"--cni-bin-dir=" + filepath.Join(dir, "missing"), "--sriov-bin-file=" + bin, "--no-sleep"},
		{"--cni-bin-dir=" + dst, "--sriov-bin-file=" + filepath.Join(dir, "missing"), "--no-sleep"},
	} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%q: exit 0\n%s", bad, out)
		}
	}
	if out, err := run("-h"); err != nil || !strings.Contains(out, "--cni-bin-dir=/host/opt/cni/bin") || !strings.Contains(out, "--sriov-bin-file=/usr/bin/sriov") {
		t.Errorf("-h: %v\n%s (want upstream's defaults)", err, out)
	}
}

// The image as hack/test-env.sh lays it out: busybox with its applets in
// /bin, the plugin at /usr/bin/sriov, the entrypoint at /entrypoint.sh, and
// the product's mount at /host/opt/cni/bin. Run chrooted there, the
// entrypoint with its defaults copies the plugin into the mount.
func TestEntrypointInTheImageLayout(t *testing.T) {
	require(t, os.Geteuid() == 0, "needs root (chroot)")
	_, err := os.Stat("/bin/busybox")
	require(t, err == nil, "needs /bin/busybox (busybox-static, which hack/test-env.sh installs)")
	root := t.TempDir()
	for _, d := range []string{"bin", "usr/bin", "host/opt/cni/bin", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp("/bin/busybox", "bin/busybox")
	cp("entrypoint.sh", "entrypoint.sh")
	cp(os.Args[0], "usr/bin/sriov")
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("/entrypoint.sh", "--no-sleep")
	cmd.Env = []string{"PATH=/bin:/sbin:/usr/bin:/usr/sbin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("entrypoint in the image layout: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(root, "host/opt/cni/bin/sriov")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("/host/opt/cni/bin/sriov: %v %v", fi, err)
	}
}

func TestVersionIsTheCNILibrarysAll(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), asPlugin+"=1", "CNI_COMMAND=VERSION")
	cmd.Stdin = strings.NewReader(`{"cniVersion":"0.3.1"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Join(got.SupportedVersions, " ") != strings.Join(version.All.SupportedVersions(), " ") {
		t.Errorf("VERSION %s", out)
	}
}

func TestUnsupportedSettingsAreRefusedClearly(t *testing.T) {
	zero, vlan, rate := 0, 100, 10
	for _, c := range []struct {
		name string
		n    netConf
		ok   bool
	}{
		{"defaults", netConf{}, true},
		{"vlan 0", netConf{SriovNetConf: SriovNetConf{Vlan: &zero}}, true},
		{"rates 0", netConf{SriovNetConf: SriovNetConf{MinTxRate: &zero, MaxTxRate: &zero}}, true},
		{"link_state enable, spoofchk, trust", netConf{SriovNetConf: SriovNetConf{LinkState: "enable", SpoofChk: "on", Trust: "off"}}, true},
		{"MAC on a netdev VF", netConf{SriovNetConf: SriovNetConf{MAC: "02:00:00:00:00:01"}}, true},
		{"vlan 100", netConf{SriovNetConf: SriovNetConf{Vlan: &vlan}}, false},
		{"max_tx_rate", netConf{SriovNetConf: SriovNetConf{MaxTxRate: &rate}}, false},
		{"link_state disable", netConf{SriovNetConf: SriovNetConf{LinkState: "disable"}}, false},
		{"MAC on a DPDK VF", netConf{SriovNetConf: SriovNetConf{MAC: "02:00:00:00:00:01", DPDKMode: true}}, false},
	} {
		err := c.n.unsupported()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "stand-in") {
			t.Errorf("%s: %v does not say it is the stand-in's limit", c.name, err)
		}
	}
}

// rig is the integration fixture: a "node" netns holding a PF and a VF
// netdev (veth links), a "pod" netns, a tiny fake sysfs describing them
// and a second VF bound to vfio-pci, and a fake IPAM plugin.
type rig struct {
	node, pod       string // netns names
	pfName, vfName  string
	pf, vf, dpdkVF  string // PCI addresses
	vfMAC           string
	sysfs, dir, bin string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	require(t, os.Geteuid() == 0, "needs root (network namespaces, netlink moves)")
	_, err := exec.LookPath("nsenter")
	require(t, err == nil, "needs nsenter(1) (util-linux) to run the plugin in the node's netns")
	id := os.Getpid() % 100000
	r := &rig{
		node: fmt.Sprintf("scni-node-%d", id), pod: fmt.Sprintf("scni-pod-%d", id),
		pfName: fmt.Sprintf("scnip%d", id), vfName: fmt.Sprintf("scniv%d", id),
		pf: "0000:5c:00.0", vf: "0000:5c:10.0", dpdkVF: "0000:5c:10.1",
		dir: t.TempDir(),
	}
	r.sysfs, r.bin = filepath.Join(r.dir, "sys"), filepath.Join(r.dir, "bin")
	for _, n := range []string{r.node, r.pod} {
		t.Cleanup(func() {
			if err := nsutil.Delete(n); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		if err := nsutil.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	// veth pairs (this kernel may have no dummy driver); the peers stay
	// in the node.
	h := r.handle(t, r.node)
	for _, name := range []string{r.pfName, r.vfName} {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // before the netns go (Cleanups run last first)
		for _, n := range []string{r.node, r.pod} {
			if ns, err := netns.GetFromName(n); err == nil {
				if h, err := netlink.NewHandleAt(ns); err == nil {
					for _, name := range []string{r.pfName, r.vfName, "net1", "net2"} {
						if l, err := h.LinkByName(name); err == nil {
							_ = h.LinkDel(l)
						}
					}
					h.Close()
				}
				ns.Close()
			}
		}
	})
	vfLink, err := h.LinkByName(r.vfName)
	if err != nil {
		t.Fatal(err)
	}
	r.vfMAC = vfLink.Attrs().HardwareAddr.String()

	// The sysfs sriov-cni reads: the VFs' physfn and net/, the PF's
	// sriov_numvfs and virtfn<n> through class/net/<pf>/device, drivers.
	dev := func(bdf string) string { return filepath.Join(r.sysfs, "bus/pci/devices", bdf) }
	mkdir := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"iavf", "vfio-pci"} {
		mkdir(filepath.Join(r.sysfs, "bus/pci/drivers", d))
	}
	mkdir(filepath.Join(dev(r.pf), "net", r.pfName))
	link("../..", filepath.Join(dev(r.pf), "net", r.pfName, "device"))
	if err := os.WriteFile(filepath.Join(dev(r.pf), "sriov_numvfs"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(filepath.Join(r.sysfs, "class/net"))
	link("../../bus/pci/devices/"+r.pf+"/net/"+r.pfName, filepath.Join(r.sysfs, "class/net", r.pfName))
	for i, vf := range []string{r.vf, r.dpdkVF} {
		mkdir(dev(vf))
		link("../"+vf, filepath.Join(dev(r.pf), fmt.Sprintf("virtfn%d", i)))
		link("../"+r.pf, filepath.Join(dev(vf), "physfn"))
	}
	mkdir(filepath.Join(dev(r.vf), "net", r.vfName))
	link("../../drivers/iavf", filepath.Join(dev(r.vf), "driver"))
	link("../../drivers/vfio-pci", filepath.Join(dev(r.dpdkVF), "driver"))

	// IPAM: a fake plugin that records its calls and hands out one address.
	mkdir(r.bin)
	script := "#!/bin/sh\necho \"$CNI_COMMAND $CNI_CONTAINERID\" >> " + filepath.Join(r.dir, "ipam.log") + "\n" +
		`[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.56.217.5/24","gateway":"10.56.217.1"}]}'` + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(r.bin, "scni-ipam"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) handle(t *testing.T, name string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// cni runs the plugin in the node's netns as Multus would, returning its
// stdout (the result or the error JSON) and whether it exited 0.
func (r *rig) cni(t *testing.T, command, containerID, ifName, conf string) (string, bool) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+r.node, os.Args[0])
	cmd.Env = append(os.Environ(), asPlugin+"=1",
		"CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS=/var/run/netns/"+r.pod,
		"CNI_IFNAME="+ifName, "CNI_PATH="+r.bin,
		"SRIOV_CNI_STANDIN_SYSFS="+r.sysfs, "SRIOV_CNI_STANDIN_DIR="+filepath.Join(r.dir, "cache"))
	cmd.Stdin = strings.NewReader(conf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Logf("%s %s: %v; stderr: %s", command, ifName, err, stderr.String())
	}
	return stdout.String(), err == nil
}

func addrs(t *testing.T, h *netlink.Handle, l netlink.Link) []string {
	t.Helper()
	list, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list {
		out = append(out, a.IPNet.String())
	}
	return out
}

func TestAddMovesTheVFIntoThePodAndDelBringsItBack(t *testing.T) {
	r := newRig(t)
	const mac = "02:00:00:5c:10:00"
	conf := `{"cniVersion":"0.3.1","name":"sriov-lane-smoke","type":"sriov","deviceID":"` + r.vf + `",
		"runtimeConfig":{"mac":"` + strings.ToUpper(mac) + `"},"ipam":{"type":"scni-ipam"}}`
	out, ok := r.cni(t, "ADD", "c1", "net1", conf)
	if !ok {
		t.Fatalf("ADD failed: %s", out)
	}
	var res struct {
		Interfaces []struct{ Name, Mac, Sandbox string }
		IPs        []struct {
			Address   string
			Interface *int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Mac != mac ||
		res.Interfaces[0].Sandbox != "/var/run/netns/"+r.pod || len(res.IPs) != 1 || res.IPs[0].Address != "10.56.217.5/24" ||
		res.IPs[0].Interface == nil || *res.IPs[0].Interface != 0 {
		t.Errorf("ADD result %s", out)
	}

	pod, node := r.handle(t, r.pod), r.handle(t, r.node)
	in, err := pod.LinkByName("net1")
	if err != nil {
		t.Fatalf("net1 not in the pod: %v", err)
	}
	if in.Attrs().HardwareAddr.String() != mac || in.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("net1 in the pod: MAC %s, flags %v; want %s, up", in.Attrs().HardwareAddr, in.Attrs().Flags, mac)
	}
	if got := addrs(t, pod, in); len(got) != 1 || got[0] != "10.56.217.5/24" {
		t.Errorf("net1 addresses %v, want the IPAM address", got)
	}
	if _, err := node.LinkByName(r.vfName); err == nil {
		t.Errorf("%s still in the node", r.vfName)
	}
	// The cache has upstream's keys (both halves of its NetConf).
	cache := filepath.Join(r.dir, "cache")
	var cached map[string]any
	if b, err := os.ReadFile(filepath.Join(cache, "c1-net1")); err != nil || json.Unmarshal(b, &cached) != nil {
		t.Errorf("cached conf: %v %s", err, b)
	}
	orig, _ := cached["OrigVfState"].(map[string]any)
	if cached["Master"] != r.pfName || cached["deviceID"] != r.vf || cached["MAC"] != mac || cached["cniVersion"] != "0.3.1" ||
		orig["HostIFName"] != r.vfName || orig["EffectiveMAC"] != r.vfMAC {
		t.Errorf("cached conf %v", cached)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "pci", r.vf)); err != nil || string(b) != "/var/run/netns/"+r.pod {
		t.Errorf("PCI allocation %q, %v", b, err)
	}
	// The VF is taken while the pod's netns lives.
	if out, ok := r.cni(t, "ADD", "c2", "net1", conf); ok || !strings.Contains(out, "already allocated") {
		t.Errorf("second ADD of %s: ok=%v %s", r.vf, ok, out)
	}

	if out, ok := r.cni(t, "DEL", "c1", "net1", conf); !ok {
		t.Fatalf("DEL failed: %s", out)
	}
	back, err := node.LinkByName(r.vfName)
	if err != nil {
		t.Fatalf("%s not back in the node: %v", r.vfName, err)
	}
	if back.Attrs().HardwareAddr.String() != r.vfMAC {
		t.Errorf("%s MAC %s after DEL, want its own %s", r.vfName, back.Attrs().HardwareAddr, r.vfMAC)
	}
	if got := addrs(t, node, back); len(got) != 0 {
		t.Errorf("%s keeps addresses %v", r.vfName, got)
	}
	if _, err := pod.LinkByName("net1"); err == nil {
		t.Error("net1 still in the pod")
	}
	for _, p := range []string{filepath.Join(cache, "c1-net1"), filepath.Join(cache, "pci", r.vf)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after DEL", p)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(r.dir, "ipam.log")); string(log) != "ADD c1\nDEL c1\n" {
		t.Errorf("IPAM calls %q, want ADD then DEL of c1", log)
	}
	// DEL again (kubelet retries): nothing cached, success.
	if out, ok := r.cni(t, "DEL", "c1", "net1", conf); !ok {
		t.Errorf("repeated DEL failed: %s", out)
	}
}

func TestDPDKVFIsReportedNotMoved(t *testing.T) {
	r := newRig(t)
	conf := `{"cniVersion":"0.3.1","name":"sriov-lane-smoke","type":"sriov","deviceID":"` + r.dpdkVF + `"}`
	// Refused before anything is done: a MAC for a DPDK VF.
	if out, ok := r.cni(t, "ADD", "c4", "net1", strings.Replace(conf, `"type"`, `"mac":"02:00:00:00:00:09","type"`, 1)); ok || !strings.Contains(out, "stand-in") {
		t.Errorf("MAC for a DPDK VF: ok=%v %s", ok, out)
	}
	out, ok := r.cni(t, "ADD", "c3", "net1", conf)
	if !ok {
		t.Fatalf("ADD failed: %s", out)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// As pkg/cnicommands/cni.go@v2.10.0: the interface is named with its
	// sandbox, no MAC (no administrative MAC set), no IPs (and at 0.3.1
	// no MTU).
	want := `{"cniVersion":"0.3.1","interfaces":[{"name":"net1","sandbox":"/var/run/netns/` + r.pod + `"}],"dns":{}}`
	if strings.Join(strings.Fields(out), "") != want {
		t.Errorf("DPDK ADD result %s\nwant %s", out, want)
	}
	if links, _ := r.handle(t, r.pod).LinkList(); len(links) != 1 {
		t.Errorf("pod netns has %d links, want only lo", len(links))
	}
	// DEL as upstream: DPDK mode is not cached, so the first DEL looks for
	// net1 in the pod and fails; the retry finds no cache and succeeds.
	if out, ok := r.cni(t, "DEL", "c3", "net1", conf); ok || !strings.Contains(out, "net1") {
		t.Errorf("first DEL of a DPDK VF: ok=%v %s (upstream fails here)", ok, out)
	}
	if out, ok := r.cni(t, "DEL", "c3", "net1", conf); !ok {
		t.Errorf("second DEL: %s", out)
	}
}

func TestCmdAddNeedsDeviceID(t *testing.T) {
	p := &plugin{sysfs: t.TempDir(), cniDir: t.TempDir()}
	err := p.add(&skel.CmdArgs{StdinData: []byte(`{"cniVersion":"0.3.1","name":"n","type":"sriov"}`)})
	if err == nil || !strings.Contains(err.Error(), "VF pci addr is required") {
		t.Errorf("no deviceID: %v", err)
	}
}
