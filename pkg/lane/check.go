package lane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// CheckStatus is the verdict of one preflight check.
type CheckStatus string

const (
	Pass CheckStatus = "pass"
	Warn CheckStatus = "warn"
	Fail CheckStatus = "fail"
)

// CheckResult is one line of `sriov-lane check`.
type CheckResult struct {
	Name    string      `json:"name"`
	Status  CheckStatus `json:"status"`
	Message string      `json:"message"`
	Hint    string      `json:"hint,omitempty"`
	// PF is the PF a "pf NAME" line is about, for machines reading -o json.
	PF *PFSummary `json:"pf,omitempty"`
}

// Checker runs the preflight checks. It changes nothing on the host.
type Checker struct {
	Lane *config.Lane
	// Engines are the command run's clients of the container engines: the
	// engine check asks for the one the lane's containerEngine selects.
	Engines *provider.Engines
	// Engine is what the engine check found the engine to be (Run sets it;
	// zero when it could not tell).
	Engine provider.EngineInfo
	// PFs lists PF candidates; injected so check and up share discovery.
	PFs func(ctx context.Context) (PFReport, error)
}

// PFReport is what the PF check needs to know from discovery.
type PFReport struct {
	Usable   []PFSummary
	Excluded []PFSummary // with the reason in Note
}

// PFSummary is one PF as check prints it.
type PFSummary struct {
	Name     string `json:"name"`
	PCI      string `json:"pci"`
	Driver   string `json:"driver"`
	TotalVFs int    `json:"totalVFs"`
	// VFs are the VFs the PF has now (another lane's, or made outside any
	// lane) with their drivers: what a netdevice lane's VFs will be bound
	// to is the NIC's VF driver, seen here.
	VFs  []VFStatus `json:"vfs,omitempty"`
	Note string     `json:"note,omitempty"`
	// EmulationReport marks a PF a hypervisor emulates (QEMU's igb), so a
	// suite on the lane can skip what it lacks.
	sriov.EmulationReport
}

// emulationText says a PF is emulated and what it lacks ("" for a real one).
func emulationText(pf PFSummary) string {
	if !pf.Emulated {
		return ""
	}
	s := "; emulated: " + pf.Emulation
	if len(pf.EmulationLacks) > 0 {
		s += ", lacks " + strings.Join(pf.EmulationLacks, "; ")
	}
	return s
}

// vfsText lists VFs with their drivers for a check line ("" for none).
func vfsText(vfs []VFStatus) string {
	if len(vfs) == 0 {
		return ""
	}
	parts := make([]string, len(vfs))
	for i, vf := range vfs {
		parts[i] = vf.PCI + " " + vf.Driver
	}
	return fmt.Sprintf("; %d VFs: %s", len(vfs), strings.Join(parts, ", "))
}

// Run performs every check, in the order users read them.
func (c *Checker) Run(ctx context.Context) []CheckResult {
	l := c.Lane
	var out []CheckResult
	add := func(name string, st CheckStatus, msg, hint string) {
		out = append(out, CheckResult{Name: name, Status: st, Message: msg, Hint: hint})
	}

	if os.Geteuid() == 0 {
		add("root", Pass, "running as root", "")
	} else {
		add("root", Fail, fmt.Sprintf("running as uid %d", os.Geteuid()), "moving PFs and writing sysfs need root: run it as root")
	}

	c.checkEngine(ctx, add)
	checkCgroup(provider.HostCgroupRoot, add)
	checkInotify(inotifyInstancesFile, add)
	c.checkSysfs(add)
	c.checkPFs(ctx, func(r CheckResult) { out = append(out, r) })

	if fi, err := os.Stat(filepath.Join(l.VFIODir, "vfio")); err == nil && fi.Mode()&os.ModeType != os.ModeDir {
		add("vfio-device", Pass, filepath.Join(l.VFIODir, "vfio")+" present", "")
	} else if l.VFDriver == config.VFDriverVFIO {
		add("vfio-device", Fail, filepath.Join(l.VFIODir, "vfio")+" missing", "load vfio-pci (modprobe vfio-pci) and enable the IOMMU (intel_iommu=on / amd_iommu=on), or use --vf-driver netdevice")
	} else {
		add("vfio-device", Warn, filepath.Join(l.VFIODir, "vfio")+" missing", "only needed for vfio-pci VFs")
	}

	if dirExists(filepath.Join(l.SysfsRoot, "bus/pci/drivers/vfio-pci")) {
		add("vfio-pci-driver", Pass, "vfio-pci driver registered", "")
	} else if l.VFDriver == config.VFDriverVFIO {
		add("vfio-pci-driver", Fail, "vfio-pci driver not registered under "+filepath.Join(l.SysfsRoot, "bus/pci/drivers"), "modprobe vfio-pci")
	} else {
		add("vfio-pci-driver", Warn, "vfio-pci driver not registered", "only needed for vfio-pci VFs")
	}

	groups, err := os.ReadDir(filepath.Join(l.SysfsRoot, "kernel/iommu_groups"))
	if len(groups) > 0 {
		add("iommu", Pass, fmt.Sprintf("%d IOMMU groups", len(groups)), "")
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		// No directory is no IOMMU (below); one that cannot be read says why.
		add("iommu", Fail, "reading IOMMU groups: "+err.Error(), "")
	} else if l.VFDriver == config.VFDriverVFIO {
		add("iommu", Fail, "no IOMMU groups under "+filepath.Join(l.SysfsRoot, "kernel/iommu_groups"), "enable VT-d/AMD-Vi in firmware and boot with intel_iommu=on iommu=pt")
	} else {
		add("iommu", Warn, "no IOMMU groups", "only needed for vfio-pci VFs")
	}

	if l.IPFamily == config.IPFamilyIPv6 || l.IPFamily == config.IPFamilyDual {
		if why := provider.HostIPv6("/proc"); why != "" {
			add("ip-family", Fail, "ipFamily "+l.IPFamily+": "+why+", so Docker cannot give the lane's network IPv6", "enable IPv6 on the host, or use --ip-family ipv4")
		} else {
			add("ip-family", Pass, "ipFamily "+l.IPFamily+": host kernel has IPv6", "")
		}
	}

	c.checkPort(add, "api-port", "127.0.0.1", l.APIPort, "--api-port (HOST_PORT)")
	if l.RegistryEnabled() {
		host, port, err := net.SplitHostPort(l.Registry.Address)
		p, perr := strconv.Atoi(port)
		if err := errors.Join(err, perr); err != nil {
			// pkg/config refuses such an address: a Checker built by hand.
			add("registry-port", Fail, "registry.address "+l.Registry.Address+": "+err.Error(), "--registry-address IP:PORT")
		} else {
			c.checkPort(add, "registry-port", host, p, "--registry-address, or --registry=false")
		}
	}
	return out
}

// Failed reports whether any hard requirement failed.
func Failed(results []CheckResult) bool {
	for _, r := range results {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// engineCheckTimeout bounds check's engine calls together (what it is,
// and the look-up for an existing lane), so an engine that does not answer
// is reported rather than left to hang check. Docker answers in
// milliseconds; Podman's /version takes seconds: it gathers
// runtime.Info, which runs conmon and the OCI runtime with --version, asks
// the package manager (dpkg -S, rpm -q) which package each comes from and
// lists the image and container stores under the store's lock, then runs
// the two again (containers/podman pkg/api/handlers/compat/version.go,
// libpod/info.go, libpod/util.go packageVersion@v4.3.1), waiting for any
// other Podman command that holds the lock. Five seconds were not enough on
// a loaded 2-core machine in make test.
const engineCheckTimeout = 30 * time.Second

// checkEngine names the container engine the lane would run on (which,
// its version and API version, where) and fails on one a lane cannot use:
// unreachable, rootless, too old, or not the engine containerEngine asks for.
func (c *Checker) checkEngine(ctx context.Context, add func(string, CheckStatus, string, string)) {
	want := c.Lane.ContainerEngine
	cli, err := c.Engines.Client(want)
	if err != nil {
		add("engine", Fail, err.Error(), "")
		add("k3s-image", Warn, "not checked: no container engine", "")
		return
	}
	pctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	defer cancel()
	info, err := provider.Identify(pctx, cli)
	if err != nil {
		add("engine", Fail, "not reachable: "+err.Error(), startEngineHint(want))
		add("k3s-image", Warn, "not checked: container engine not reachable", "")
		return
	}
	c.Engine = info
	at, refusal := info.String()+" at "+cli.DaemonHost(), info.Refusal()
	switch {
	case want != "" && info.Name != want:
		add("engine", Fail, "containerEngine is "+want+" but the engine is "+at, "point DOCKER_HOST at "+want+"'s socket or unset it, or set containerEngine (--container-engine, CRI_BIN) to "+info.Name)
		add("k3s-image", Warn, "not checked: not the engine asked for", "")
		return
	case refusal != "":
		add("engine", Fail, at+": "+refusal, "run the engine as root, and sriov-lane as root against it")
		add("k3s-image", Warn, "not checked: the engine cannot run a lane", "")
		return
	}
	add("engine", Pass, at, "")
	if lack := info.Lack(); lack != "" {
		add("engine-network", Warn, lack, "use Podman's netavark backend with aardvark-dns (Debian: apt install netavark aardvark-dns; [network] network_backend = \"netavark\" in containers.conf), or install the dnsname plugin")
	}
	switch err := provider.NewWithClient(cli).RefuseExisting(pctx, c.Lane.ClusterName(), c.Lane.RegistryEnabled()); {
	case errors.Is(err, provider.ErrExists):
		add("cluster-name", Fail, err.Error(), "pick another --name, or 'sriov-lane down --name "+c.Lane.Name+"' if it is this tool's lane")
	case err != nil:
		add("cluster-name", Fail, "looking for k3d cluster "+c.Lane.ClusterName()+": "+err.Error(), "check the container engine")
	default:
		add("cluster-name", Pass, "no k3d cluster named "+c.Lane.ClusterName(), "")
	}
	if _, err := cli.ImageInspect(pctx, c.Lane.K3sImage); err == nil {
		add("k3s-image", Pass, c.Lane.K3sImage+" present locally", "")
	} else {
		add("k3s-image", Warn, c.Lane.K3sImage+" not present locally: up will pull it", info.Name+" pull "+c.Lane.K3sImage+" ahead of time, or set imageRegistryMirror")
	}
}

// startEngineHint says how to start the engine a lane asked for.
func startEngineHint(want string) string {
	switch want {
	case config.EngineDocker:
		return "start dockerd (systemctl start docker), or set DOCKER_HOST"
	case config.EnginePodman:
		return "start Podman's API socket as root (systemctl enable --now podman.socket), or set DOCKER_HOST"
	}
	return "start dockerd (systemctl start docker) or Podman's API socket (systemctl enable --now podman.socket), or set DOCKER_HOST"
}

// checkCgroup reports the host's cgroup version. v1 is no failure, up
// handles it; it is a warning because kubelet has deprecated it and refuses
// it unless told not to.
func checkCgroup(root string, add func(string, CheckStatus, string, string)) {
	mode, err := provider.DetectCgroup(root)
	switch {
	case err != nil:
		add("cgroup", Warn, err.Error(), "kubelet >= 1.35 refuses cgroup v1 by default; up passes it fail-cgroupv1=false only on a host it knows is v1")
	case mode.V1():
		add("cgroup", Warn, mode.Describe()+": up passes kubelet fail-cgroupv1=false to every node",
			"kubelet >= 1.35 refuses cgroup v1 unless told otherwise and will drop it; boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2")
	default:
		add("cgroup", Pass, mode.Describe(), "")
	}
}

// inotifyInstancesFile is the host's per-user limit on inotify instances.
// Every node's kubelet, containerd, flanneld and Multus take theirs from
// root's one budget, 128 by default: a second or third lane's pods then
// fail with "too many open files" (kind's known issue, which recommends 512).
const inotifyInstancesFile = "/proc/sys/fs/inotify/max_user_instances"

const minInotifyInstances = 512

func checkInotify(path string, add func(string, CheckStatus, string, string)) {
	b, err := os.ReadFile(path)
	n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	switch {
	case err != nil || perr != nil:
		add("inotify", Warn, fmt.Sprintf("cannot read %s: %v", path, errors.Join(err, perr)), "")
	case n < minInotifyInstances:
		add("inotify", Warn, fmt.Sprintf("fs.inotify.max_user_instances is %d: several lanes' nodes share it and their pods fail with \"too many open files\"", n),
			fmt.Sprintf("sysctl -w fs.inotify.max_user_instances=%d (and persist it in /etc/sysctl.d)", minInotifyInstances))
	default:
		add("inotify", Pass, fmt.Sprintf("fs.inotify.max_user_instances %d", n), "")
	}
}

func (c *Checker) checkSysfs(add func(string, CheckStatus, string, string)) {
	root := c.Lane.SysfsRoot
	devs := filepath.Join(root, "bus/pci/devices")
	if _, err := os.ReadDir(devs); err != nil {
		add("sysfs", Fail, "cannot read "+devs+": "+err.Error(), "set --sysfs-root to where the host's /sys is mounted")
		return
	}
	probe := filepath.Join(root, "bus/pci/drivers_probe")
	if err := unix.Access(probe, unix.W_OK); err != nil {
		add("sysfs", Fail, probe+" not writable: "+err.Error(), "sysfs is read-only here: run on the host, or mount the host's /sys read-write (privileged pod) and pass --sysfs-root")
		return
	}
	add("sysfs", Pass, root+" readable and writable", "")
}

func (c *Checker) checkPFs(ctx context.Context, emit func(CheckResult)) {
	add := func(st CheckStatus, msg, hint string) {
		emit(CheckResult{Name: "pfs", Status: st, Message: msg, Hint: hint})
	}
	addPF := func(pf PFSummary, st CheckStatus, msg string) {
		emit(CheckResult{Name: "pf " + pf.Name, Status: st, Message: msg, PF: &pf})
	}
	l := c.Lane
	need := l.PFsNeeded()
	if c.PFs == nil {
		add(Fail, "PF discovery unavailable", "")
		return
	}
	rep, err := c.PFs(ctx)
	if err != nil {
		add(Fail, "PF discovery failed: "+err.Error(), "check --sysfs-root")
		return
	}
	usable := 0
	for _, pf := range rep.Usable {
		st := Pass
		msg := fmt.Sprintf("%s (%s) driver %s, totalvfs %d%s%s", pf.Name, pf.PCI, pf.Driver, pf.TotalVFs, vfsText(pf.VFs), emulationText(pf))
		if !l.EnoughVFs(pf.TotalVFs) {
			st = Warn
			msg += fmt.Sprintf(": fewer than vfsPerPF=%d, not usable", l.VFsPerPF)
		} else {
			usable++
		}
		addPF(pf, st, msg)
	}
	for _, pf := range rep.Excluded {
		// The reason says what would take it: an include list does not
		// override pfs.exclude, and a glob never takes a PF the host uses.
		addPF(pf, Warn, fmt.Sprintf("%s (%s) not chosen: %s%s%s", pf.Name, pf.PCI, pf.Note, vfsText(pf.VFs), emulationText(pf)))
	}
	msg := fmt.Sprintf("%d usable SR-IOV PFs, need %d (agents %d x pfsPerNode %d)", usable, need, l.Agents, l.PFsPerNode)
	if small := len(rep.Usable) - usable; small > 0 {
		msg += fmt.Sprintf("; %d more have sriov_totalvfs below vfsPerPF=%d", small, l.VFsPerPF)
	}
	switch {
	case usable == 0 && len(rep.Excluded) == 0:
		add(Fail, "no SR-IOV PF found under "+l.SysfsRoot+": "+msg, "this host has no SR-IOV NIC (no netdev whose PCI device has sriov_totalvfs > 0), or --sysfs-root is wrong")
	case usable < need:
		add(Fail, msg, "lower --agents or --pfs-per-node, free PFs leased by other lanes (sriov-lane status), or widen pfs.include")
	default:
		add(Pass, msg, "")
	}
}

func (c *Checker) checkPort(add func(string, CheckStatus, string, string), name, host string, port int, flag string) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		add(name, Fail, addr+" is in use: "+err.Error(), "pick another with "+flag+", or bring down the lane using it")
		return
	}
	ln.Close()
	add(name, Pass, addr+" free", "")
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func (s CheckStatus) String() string { return string(s) }
