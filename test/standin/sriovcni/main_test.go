package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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

// tree is a tiny fake sysfs for the plugin, as sriov-cni reads it (the
// VFs' physfn and net/, the PF's sriov_numvfs and virtfn<n> through
// class/net/<pf>/device, drivers): a PF with three VFs, vf with a netdev
// on igbvf, dpdkVF on vfio-pci, bareVF on iavf without a netdev (two
// kernel drivers: the plugin treats every driver outside its userspace
// list alike, reading it from the driver link); and a
// bin directory with fake IPAM plugins: scni-ipam hands out one address,
// scni-noip none; both log their calls to ipam.log.
type tree struct {
	pfName, vfName         string
	pf, vf, dpdkVF, bareVF string // PCI addresses
	sysfs, dir, bin        string
}

func newTree(t *testing.T) *tree {
	t.Helper()
	id := os.Getpid() % 100000
	r := &tree{
		pfName: fmt.Sprintf("scnip%d", id), vfName: fmt.Sprintf("scniv%d", id),
		pf: "0000:5c:00.0", vf: "0000:5c:10.0", dpdkVF: "0000:5c:10.1", bareVF: "0000:5c:10.2",
		dir: t.TempDir(),
	}
	r.sysfs, r.bin = filepath.Join(r.dir, "sys"), filepath.Join(r.dir, "bin")
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
	for _, d := range []string{"igbvf", "iavf", "vfio-pci"} {
		mkdir(filepath.Join(r.sysfs, "bus/pci/drivers", d))
	}
	mkdir(filepath.Join(dev(r.pf), "net", r.pfName))
	link("../..", filepath.Join(dev(r.pf), "net", r.pfName, "device"))
	if err := os.WriteFile(filepath.Join(dev(r.pf), "sriov_numvfs"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(filepath.Join(r.sysfs, "class/net"))
	link("../../bus/pci/devices/"+r.pf+"/net/"+r.pfName, filepath.Join(r.sysfs, "class/net", r.pfName))
	for i, vf := range []string{r.vf, r.dpdkVF, r.bareVF} {
		mkdir(dev(vf))
		link("../"+vf, filepath.Join(dev(r.pf), fmt.Sprintf("virtfn%d", i)))
		link("../"+r.pf, filepath.Join(dev(vf), "physfn"))
	}
	mkdir(filepath.Join(dev(r.vf), "net", r.vfName))
	link("../../drivers/igbvf", filepath.Join(dev(r.vf), "driver"))
	link("../../drivers/vfio-pci", filepath.Join(dev(r.dpdkVF), "driver"))
	link("../../drivers/iavf", filepath.Join(dev(r.bareVF), "driver"))

	mkdir(r.bin)
	logTo := "echo \"$CNI_COMMAND $CNI_CONTAINERID\" >> " + filepath.Join(r.dir, "ipam.log") + "\n"
	for name, result := range map[string]string{
		"scni-ipam": `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.56.217.5/24","gateway":"10.56.217.1"}]}`,
		"scni-noip": `{"cniVersion":"0.3.1","ips":[]}`,
	} {
		script := "#!/bin/sh\n" + logTo + `[ "$CNI_COMMAND" = ADD ] && echo '` + result + `'` + "\nexit 0\n"
		if err := os.WriteFile(filepath.Join(r.bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// ipamCalls is what the fake IPAM plugins were asked.
func (r *tree) ipamCalls() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "ipam.log"))
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ", ")
}

// plugin is the stand-in reading the tree, with its cache in the tree.
func (r *tree) plugin() *plugin {
	return &plugin{sysfs: r.sysfs, cniDir: filepath.Join(r.dir, "cache")}
}

// exec runs the plugin binary with env and stdin, as a runtime does, in
// this process's netns, returning its stdout and exit status.
func (r *tree) exec(t *testing.T, env []string, conf string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), asPlugin+"=1", "CNI_PATH="+r.bin,
		"SRIOV_CNI_STANDIN_SYSFS="+r.sysfs, "SRIOV_CNI_STANDIN_DIR="+filepath.Join(r.dir, "cache")), env...)
	cmd.Stdin = strings.NewReader(conf)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// rig is the integration fixture: the tree, a "node" netns holding the PF
// and the VF netdev (veth links), and a "pod" netns.
type rig struct {
	*tree
	node, pod string // netns names
	vfMAC     string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	require(t, os.Geteuid() == 0, "needs root (network namespaces, netlink moves)")
	_, err := exec.LookPath("nsenter")
	require(t, err == nil, "needs nsenter(1) (util-linux) to run the plugin in the node's netns")
	id := os.Getpid() % 100000
	r := &rig{tree: newTree(t), node: fmt.Sprintf("scni-node-%d", id), pod: fmt.Sprintf("scni-pod-%d", id)}
	for _, n := range []string{r.node, r.pod} {
		nsutil.ForTest(t, n)
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
					for _, name := range []string{r.pfName, r.pfName + "y", r.vfName, "net1", "net2"} {
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
// stdout (the result or the error JSON) and whether it exited 0. Every
// case names the pod's interface net1.
func (r *rig) cni(t *testing.T, command, containerID, conf string, env ...string) (string, bool) {
	t.Helper()
	const ifName = "net1"
	cmd := exec.Command("nsenter", "--net=/var/run/netns/"+r.node, os.Args[0])
	cmd.Env = append(append(os.Environ(), asPlugin+"=1",
		"CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS=/var/run/netns/"+r.pod,
		"CNI_IFNAME="+ifName, "CNI_PATH="+r.bin,
		"SRIOV_CNI_STANDIN_SYSFS="+r.sysfs, "SRIOV_CNI_STANDIN_DIR="+filepath.Join(r.dir, "cache")), env...)
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
