package lane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// LaneStatus is what `status --name N` reports.
type LaneStatus struct {
	Name string `json:"name"`
	// VFAllocation is the lane's vfAllocation: what offers its VFs.
	VFAllocation string `json:"vfAllocation"`
	// Health is "healthy", or "degraded" when a PF is not where up put it
	// or its VFs are not as configured, or the cluster came back empty
	// (Problems say why and what to do).
	Health   string   `json:"health"`
	Problems []string `json:"problems,omitempty"`
	// ClusterLost: the cluster came back empty (clusterLostWords), which
	// repair mends by applying up's objects again.
	ClusterLost bool         `json:"clusterLost"`
	Pending     int          `json:"pendingJournalEntries"`
	Nodes       []NodeStatus `json:"nodes"`
	PFs         []PFStatus   `json:"pfs"`
	Notes       []string     `json:"notes,omitempty"`
}

// NodeStatus is one node container and what the API says of it.
type NodeStatus struct {
	Name        string `json:"name"`
	Role        string `json:"role"`
	Container   string `json:"container"`
	Ready       string `json:"ready,omitempty"`
	Allocatable string `json:"allocatable,omitempty"`
	// DRADevices is, in dra mode, what the driver's ResourceSlices offer
	// on the node in place of allocatable.
	DRADevices string `json:"draDevices,omitempty"`
}

// PFStatus is one leased PF: where it is now, its VFs and its lease.
type PFStatus struct {
	Name       string         `json:"name"`
	PCI        string         `json:"pci"`
	Node       string         `json:"node,omitempty"`
	NameInNode string         `json:"nameInNode,omitempty"`
	State      string         `json:"state,omitempty"`
	NumVFs     int            `json:"numVFs"`
	VFDrivers  map[string]int `json:"vfDrivers,omitempty"`
	VFs        []VFStatus     `json:"vfs,omitempty"`
	LeasedBy   string         `json:"leasedBy,omitempty"`
	// EmulationReport marks a PF a hypervisor emulates (QEMU's igb), so a
	// suite on the lane can skip what it lacks.
	sriov.EmulationReport
}

// VFStatus is one VF of a PF, as sysfs shows it now.
type VFStatus struct {
	Index int    `json:"index"`
	PCI   string `json:"pci"`
	// Driver is the VF's driver, "none" when it has none.
	Driver string `json:"driver"`
}

// vfStatuses lists the VFs of the PF at pci with their drivers.
func vfStatuses(sys sriov.Sysfs, pci string) []VFStatus {
	var out []VFStatus
	for _, vf := range sys.ListVFs(pci) {
		out = append(out, VFStatus{Index: vf.Index, PCI: vf.PCI, Driver: vf.DriverOrNone()})
	}
	return out
}

// Describe gathers a lane's status from its journal, Docker, the node
// network namespaces, sysfs and the API. It changes nothing. engines are
// the command run's clients of the container engines.
func Describe(ctx context.Context, l *config.Lane, engines *provider.Engines) (*LaneStatus, error) {
	if err := requireLane(l); err != nil {
		return nil, err
	}
	entries, err := journal.Read(l.Dir().Journal())
	if err != nil {
		return nil, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	st := &LaneStatus{Name: l.Name, VFAllocation: l.VFAllocation}
	for _, e := range entries {
		if !e.Undone {
			st.Pending++
		}
	}
	cli, err := engines.Client(l.ContainerEngine)
	if err != nil {
		return nil, err
	}
	p := provider.NewWithClient(cli)
	nodes, err := p.Nodes(ctx, l.ClusterName())
	if err != nil {
		st.Notes = append(st.Notes, "listing nodes: "+err.Error())
	}
	kc, err := connectKube(l)
	if err != nil {
		st.Notes = append(st.Notes, err.Error())
	}
	var pools map[string]cni.DRAPool
	if kc != nil && l.VFAllocation == config.VFAllocationDRA {
		if pools, err = cni.ListDRAPools(ctx, kc.Typed); err != nil {
			st.Notes = append(st.Notes, err.Error())
		}
	}
	for _, n := range nodes {
		ns := NodeStatus{Name: n.Name, Role: n.Role, Container: shortID(n.ContainerID)}
		if kc != nil {
			if node, err := kc.Typed.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				for _, c := range node.Status.Conditions {
					if c.Type == "Ready" {
						ns.Ready = string(c.Status)
					}
				}
				if q, ok := node.Status.Allocatable[corev1.ResourceName(l.Resource())]; ok {
					ns.Allocatable = l.Resource() + "=" + q.String()
				}
				if p, ok := pools[n.Name]; ok {
					ns.DRADevices = p.String()
				}
			}
		}
		st.Nodes = append(st.Nodes, ns)
	}
	if kc != nil {
		if lost, err := clusterLost(ctx, l, kc); err != nil {
			st.Notes = append(st.Notes, "telling whether the cluster came back empty: "+err.Error())
		} else if lost {
			st.ClusterLost = true
			st.Problems = append(st.Problems, fmt.Sprintf("%s: run 'sriov-lane repair --name %s'", clusterLostWords, l.Name))
		}
	}
	leases, err := sriov.NewLeaser(l.StateDir).Leases()
	if err != nil {
		st.Notes = append(st.Notes, "reading leases: "+err.Error())
	}
	sys := sriov.Sysfs{Root: l.SysfsRoot}
	for _, h := range readHealth(ctx, l, cli, sriov.Locate, nodes, sriov.Placements(entries)) {
		ps := PFStatus{Name: h.PF.Name, PCI: h.PF.PCI, Node: h.Node, NameInNode: h.NameInNode, State: h.State}
		if ls, ok := leases[h.PF.PCI]; ok {
			ps.LeasedBy = ls.Lane
		}
		if ps.NumVFs, err = sys.ReadInt(h.PF.PCI, "sriov_numvfs"); err != nil {
			st.Notes = append(st.Notes, fmt.Sprintf("%s: %v", h.PF, err))
		}
		ps.VFDrivers = sys.VFDrivers(h.PF.PCI)
		ps.VFs = vfStatuses(sys, h.PF.PCI)
		ps.EmulationReport = sriov.EmulationOf(sys, h.PF.PCI)
		if h.Problem != "" {
			st.Problems = append(st.Problems, h.String())
		}
		st.PFs = append(st.PFs, ps)
	}
	st.Health = "healthy"
	if len(st.Problems) > 0 {
		st.Health = "degraded"
	}
	return st, nil
}

// connectKube connects to the lane's cluster: nil and no error when the
// lane has no kubeconfig (up did not get that far).
func connectKube(l *config.Lane) (*kube.Clients, error) {
	kc := l.KubeconfigPath()
	if _, err := os.Stat(kc); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return kube.Connect(kc)
}

// vfProblem says how the VFs of the PF at pci differ from what up made
// (vfsPerPF of them, each on vfio-pci, or in netdevice mode on a kernel
// driver), naming each VF that is not, or "" when they do not: a job may
// have removed or rebound them. A netdevice VF on no driver is never
// advertised by the device plugin (it skips a device without one), one on
// vfio-pci has no netdev for sriov-cni to move.
func vfProblem(l *config.Lane, sys sriov.Sysfs, pci string) string {
	n, err := sys.ReadInt(pci, "sriov_numvfs")
	if err != nil {
		return fmt.Sprintf("cannot read its sriov_numvfs: %v", err)
	}
	if n != l.VFsPerPF {
		return fmt.Sprintf("%d VFs, want %d", n, l.VFsPerPF)
	}
	want := config.VFDriverVFIO
	ok := func(d string) bool { return d == config.VFDriverVFIO }
	if l.VFDriver == config.VFDriverNetdevice {
		want = "a kernel driver"
		ok = func(d string) bool { return d != config.VFDriverVFIO && d != "" }
	}
	var wrong []string
	for _, vf := range sys.ListVFs(pci) {
		if !ok(vf.Driver) {
			wrong = append(wrong, fmt.Sprintf("VF %d (%s) on %s", vf.Index, vf.PCI, vf.DriverOrNone()))
		}
	}
	if len(wrong) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, want every VF on %s", strings.Join(wrong, ", "), want)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// FormatStatus renders a lane status for people.
func FormatStatus(st *LaneStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lane %s: %s (%d pending journal entries)\n", st.Name, st.Health, st.Pending)
	dra := st.VFAllocation == config.VFAllocationDRA
	offers := "ALLOCATABLE"
	if dra {
		offers = "DRA-DEVICES"
	}
	fmt.Fprintf(&b, "NODE\tROLE\tCONTAINER\tREADY\t%s\n", offers)
	for _, n := range st.Nodes {
		v := n.Allocatable
		if dra {
			v = n.DRADevices
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.Role, n.Container, n.Ready, v)
	}
	fmt.Fprintf(&b, "PF\tPCI\tNODE\tNAME-IN-NODE\tSTATE\tNUMVFS\tVF-DRIVERS\tLEASED-BY\n")
	for _, p := range st.PFs {
		var drv []string
		for d, n := range p.VFDrivers {
			drv = append(drv, fmt.Sprintf("%s=%d", d, n))
		}
		sort.Strings(drv)
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Name, p.PCI, p.Node, p.NameInNode, p.State, p.NumVFs, strings.Join(drv, ","), p.LeasedBy)
	}
	fmt.Fprintf(&b, "VF\tPF\tPCI\tDRIVER\n")
	for _, p := range st.PFs {
		for _, vf := range p.VFs {
			fmt.Fprintf(&b, "%d\t%s\t%s\t%s\n", vf.Index, p.Name, vf.PCI, vf.Driver)
		}
	}
	for _, p := range st.PFs {
		if p.Emulated {
			fmt.Fprintf(&b, "emulated: PF %s (%s) is %s", p.Name, p.PCI, p.Emulation)
			if len(p.EmulationLacks) > 0 {
				fmt.Fprintf(&b, "; it lacks %s", strings.Join(p.EmulationLacks, "; "))
			}
			fmt.Fprintln(&b)
		}
	}
	for _, n := range st.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, p := range st.Problems {
		fmt.Fprintf(&b, "degraded: %s\n", p)
	}
	return b.String()
}
