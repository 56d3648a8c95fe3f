package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// Upstream facts cited below are from k8snetworkplumbingwg/sriov-cni at
// v2.10.0.

// vfState is pkg/types/types.go VfState: the VF as it was before ADD.
type vfState struct {
	HostIFName   string
	SpoofChk     bool
	Trust        bool
	AdminMAC     string
	EffectiveMAC string
	Vlan         int
	VlanQoS      int
	VlanProto    int
	MinTxRate    int
	MaxTxRate    int
	LinkState    uint32
	MTU          int
}

// netConf is pkg/types/types.go NetConf: types.NetConf and SriovNetConf,
// field for field, so the cache has upstream's keys. DPDKMode is not
// cached upstream (json:"-"), and so neither here: see del.
type netConf struct {
	types.NetConf
	SriovNetConf
}

// SriovNetConf is pkg/types/types.go SriovNetConf.
type SriovNetConf struct {
	OrigVfState vfState
	DPDKMode    bool `json:"-"`
	Master      string
	MAC         string
	MTU         *int
	Vlan        *int    `json:"vlan"`
	VlanQoS     *int    `json:"vlanQoS"`
	VlanProto   *string `json:"vlanProto"`
	DeviceID    string  `json:"deviceID"`
	VFID        int
	MinTxRate   *int   `json:"min_tx_rate"`
	MaxTxRate   *int   `json:"max_tx_rate"`
	SpoofChk    string `json:"spoofchk,omitempty"`
	Trust       string `json:"trust,omitempty"`
	LinkState   string `json:"link_state,omitempty"`
	// RuntimeConfig is Multus's capability args: the pod's "mac".
	RuntimeConfig struct {
		Mac string `json:"mac,omitempty"`
	} `json:"runtimeConfig,omitempty"`
	// LogLevel and LogFile are accepted; the stand-in writes errors only,
	// to stderr, whatever they say.
	LogLevel string `json:"logLevel,omitempty"`
	LogFile  string `json:"logFile,omitempty"`
}

// MarshalJSON merges both halves, as upstream's NetConf.MarshalJSON does:
// types.NetConf has a MarshalJSON of its own, which, promoted, would
// otherwise write only its fields.
func (n *netConf) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(&n.NetConf)
	if err != nil {
		return nil, err
	}
	own, err := json.Marshal(&n.SriovNetConf)
	if err != nil {
		return nil, err
	}
	m, b := map[string]any{}, map[string]any{}
	if err := json.Unmarshal(own, &m); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, err
	}
	for k, v := range b {
		m[k] = v
	}
	return json.Marshal(m)
}

const (
	proto8021q  = "802.1q"
	proto8021ad = "802.1ad"
)

// loadConf is pkg/config/config.go LoadConf: the VF from deviceID (its PF
// netdev and VF index from sysfs), the per-VF lock, the allocation check,
// the VF netdev or the DPDK driver, and the vlan and link_state checks.
// What the stand-in cannot do is refused later, where upstream sets it
// (applyVFConfig).
func (p *plugin) loadConf(raw []byte) (*netConf, error) {
	n := &netConf{}
	if err := json.Unmarshal(raw, n); err != nil {
		return nil, fmt.Errorf("LoadConf(): failed to load netconf: %v", err)
	}
	if n.DeviceID == "" {
		return nil, fmt.Errorf("LoadConf(): VF pci addr is required")
	}
	pf, err := p.pfName(n.DeviceID)
	if err != nil {
		return nil, fmt.Errorf("LoadConf(): failed to get VF information: %q", err)
	}
	vfID, err := p.vfID(n.DeviceID, pf)
	if err != nil {
		return nil, fmt.Errorf("LoadConf(): failed to get VF information: %q", err)
	}
	n.VFID, n.Master = vfID, pf

	if err := p.lock(n.DeviceID); err != nil {
		return nil, err
	}
	allocated, err := p.isAllocated(n.DeviceID)
	if err != nil {
		return n, err
	}
	if allocated {
		return n, fmt.Errorf("pci address %s is already allocated", n.DeviceID)
	}

	hostIFName, err := p.vfLinkName(n.DeviceID)
	if err != nil || hostIFName == "" {
		dpdk, err := p.hasDpdkDriver(n.DeviceID)
		if err != nil {
			return nil, fmt.Errorf("LoadConf(): failed to detect if VF %s has dpdk driver %q", n.DeviceID, err)
		}
		n.DPDKMode = dpdk
	}
	if hostIFName != "" {
		n.OrigVfState.HostIFName = hostIFName
	}
	if hostIFName == "" && !n.DPDKMode {
		return nil, fmt.Errorf("LoadConf(): the VF %s does not have a interface name or a dpdk driver", n.DeviceID)
	}

	if n.Vlan == nil {
		if n.VlanQoS != nil {
			return nil, fmt.Errorf("LoadConf(): vlan id must be configured to set vlan QoS to a non-nil value")
		}
		if n.VlanProto != nil {
			return nil, fmt.Errorf("LoadConf(): vlan id must be configured to set vlan proto to a non-nil value")
		}
	} else {
		if *n.Vlan < 0 || *n.Vlan > 4094 {
			return nil, fmt.Errorf("LoadConf(): vlan id %d invalid: value must be in the range 0-4094", *n.Vlan)
		}
		if n.VlanQoS == nil {
			qos := 0
			n.VlanQoS = &qos
		}
		if *n.VlanQoS < 0 || *n.VlanQoS > 7 {
			return nil, fmt.Errorf("LoadConf(): vlan QoS PCP %d invalid: value must be in the range 0-7", *n.VlanQoS)
		}
		if *n.VlanQoS != 0 && *n.Vlan == 0 {
			return nil, fmt.Errorf("LoadConf(): non-zero vlan id must be configured to set vlan QoS to a non-zero value")
		}
		if n.VlanProto == nil {
			proto := proto8021q
			n.VlanProto = &proto
		}
		*n.VlanProto = strings.ToLower(*n.VlanProto)
		if *n.VlanProto != proto8021ad && *n.VlanProto != proto8021q {
			return nil, fmt.Errorf("LoadConf(): vlan Proto %s invalid: value must be '802.1Q' or '802.1ad'", *n.VlanProto)
		}
		if *n.VlanProto == proto8021ad && *n.Vlan == 0 {
			return nil, fmt.Errorf("LoadConf(): non-zero vlan id must be configured to set vlan proto 802.1ad")
		}
	}
	if n.LinkState != "" && n.LinkState != "auto" && n.LinkState != "enable" && n.LinkState != "disable" {
		return nil, fmt.Errorf("LoadConf(): invalid link_state value: %s", n.LinkState)
	}
	return n, nil
}

// fillUnset is FillFromVfInfo of a VF table entry with nothing set: no
// administrative MAC, no vlan, no rate limits, link state auto, spoofchk
// and trust off. A stand-in PF is a veth and has no VF table: upstream's
// getVfInfo would find no entry and fail ("failed to find vf"). The
// values are only cached, and restored on DEL, where the stand-in sets
// nothing back because it set nothing.
func (s *vfState) fillUnset() {
	*s = vfState{HostIFName: s.HostIFName, AdminMAC: "00:00:00:00:00:00"}
}

// applyVFConfig is pkg/sriov/sriov.go ApplyVFConfig, in its order: vlan,
// MAC, rates, spoofchk, trust, link state. The stand-in's PF is a veth
// with no VF table, so what only that table could do is refused, saying
// so; settings whose effect the rig already has are accepted: vlan 0 (no
// tag), rates of 0 (no limit), spoofchk and trust (a veth neither drops
// spoofed frames nor restricts an untrusted VF), link_state auto or enable
// (the VF netdev has carrier), and a MAC for a VF with a netdev, which is
// set on the netdev as upstream also does (SetupVF). A MAC is checked as
// utils.SetVFHardwareMAC checks it: net.ParseMAC, then the table's 6-byte
// MAC read back must print as given (lower-case, colon-separated), so
// "02-00-00-00-00-01" or an 8-byte address fails.
func (n *netConf) applyVFConfig() error {
	const why = "the rig's PF is a veth with no VF table"
	if n.Vlan != nil && *n.Vlan != 0 {
		return fmt.Errorf("sriov (stand-in): vlan %d is not supported: %s to tag with (only vlan 0)", *n.Vlan, why)
	}
	if n.MAC != "" {
		hw, err := net.ParseMAC(n.MAC)
		if err != nil {
			return fmt.Errorf("failed to set MAC address to %s: failed to parse MAC address %s: %v", n.MAC, n.MAC, err)
		}
		if len(hw) != 6 || hw.String() != n.MAC {
			return fmt.Errorf("failed to set MAC address to %s: hardware mac address is different from requested one", n.MAC)
		}
		if n.DPDKMode {
			return fmt.Errorf("sriov (stand-in): a MAC for VF %s bound to a DPDK driver is not supported: %s to set its administrative MAC in", n.DeviceID, why)
		}
	}
	if n.MinTxRate != nil && *n.MinTxRate != 0 || n.MaxTxRate != nil && *n.MaxTxRate != 0 {
		return fmt.Errorf("sriov (stand-in): min_tx_rate and max_tx_rate other than 0 are not supported: %s to limit", why)
	}
	if n.LinkState == "disable" {
		return fmt.Errorf("sriov (stand-in): link_state disable is not supported: %s to force the link down", why)
	}
	return nil
}

// macForResult is pkg/config/config.go GetMacAddressForResult. The
// stand-in has no administrative MAC to report (no VF table): as on a NIC
// whose VF has none set, a DPDK VF reports "".
func (n *netConf) macForResult() string {
	if n.MAC != "" {
		return n.MAC
	}
	if !n.DPDKMode {
		return n.OrigVfState.EffectiveMAC
	}
	if n.OrigVfState.AdminMAC != "00:00:00:00:00:00" {
		return n.OrigVfState.AdminMAC
	}
	return ""
}

// cacheRef is where ADD keeps the conf for DEL (pkg/utils/utils.go
// SaveNetConf): <cniDir>/<containerID>-<ifName>.
func (p *plugin) cacheRef(args *skel.CmdArgs) string {
	return filepath.Join(p.cniDir, args.ContainerID+"-"+args.IfName)
}

func (p *plugin) saveNetConf(args *skel.CmdArgs, n *netConf) error {
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("error serializing delegate netConf: %v", err)
	}
	if err := os.MkdirAll(p.cniDir, 0o700); err != nil {
		return fmt.Errorf("failed to create the sriov data directory(%q): %v", p.cniDir, err)
	}
	if err := os.WriteFile(p.cacheRef(args), b, 0o600); err != nil {
		return fmt.Errorf("failed to write container data in the path(%q): %v", p.cacheRef(args), err)
	}
	return nil
}

// loadConfFromCache is pkg/config/config.go LoadConfFromCache.
func (p *plugin) loadConfFromCache(args *skel.CmdArgs) (*netConf, string, error) {
	ref := p.cacheRef(args)
	b, err := os.ReadFile(ref)
	if err != nil {
		return nil, "", fmt.Errorf("error reading cached NetConf in %s with name %s", p.cniDir, filepath.Base(ref))
	}
	n := &netConf{}
	if err := json.Unmarshal(b, n); err != nil {
		return nil, "", fmt.Errorf("failed to parse NetConf: %q", err)
	}
	return n, ref, nil
}

// The PCI allocator (pkg/utils/pci_allocator.go): <cniDir>/pci/<address>
// holds the netns a VF was given to, and <cniDir>/pci/vf_lock/<address>.lock
// is flock'ed exclusively for the rest of the process.

const lockTimeout = 60 * time.Second

func (p *plugin) lock(addr string) error {
	dir := filepath.Join(p.cniDir, "pci", "vf_lock")
	if err := os.MkdirAll(dir, 0o600); err != nil {
		return fmt.Errorf("failed to create the sriov lock directory(%q): %v", dir, err)
	}
	path := filepath.Join(dir, addr+".lock")
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open PCI file [%s] for locking: %w", path, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- unix.Flock(fd, unix.LOCK_EX) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("failed to flock PCI file [%s]: %w", path, err)
		}
		return nil
	case <-time.After(lockTimeout):
		return fmt.Errorf("time out while waiting to acquire exclusive lock on [%s]", path)
	}
}

func (p *plugin) allocPath(addr string) string { return filepath.Join(p.cniDir, "pci", addr) }

func (p *plugin) saveAllocatedPCI(addr, netns string) error {
	if err := os.MkdirAll(filepath.Dir(p.allocPath(addr)), 0o600); err != nil {
		return fmt.Errorf("failed to create the sriov data directory(%q): %v", filepath.Dir(p.allocPath(addr)), err)
	}
	if err := os.WriteFile(p.allocPath(addr), []byte(netns), 0o600); err != nil {
		return fmt.Errorf("failed to write used PCI address lock file in the path(%q): %v", p.allocPath(addr), err)
	}
	return nil
}

func (p *plugin) deleteAllocatedPCI(addr string) error {
	if err := os.Remove(p.allocPath(addr)); err != nil {
		return fmt.Errorf("error removing PCI address lock file %s: %v", p.allocPath(addr), err)
	}
	return nil
}

// isAllocated: a VF is taken while its file names a netns that still
// exists; a stale file is removed.
func (p *plugin) isAllocated(addr string) (bool, error) {
	b, err := os.ReadFile(p.allocPath(addr))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to read for pci address file for %s: %v", p.allocPath(addr), err)
	}
	netns, err := ns.GetNS(string(b))
	if err != nil {
		if err := p.deleteAllocatedPCI(addr); err != nil {
			return false, fmt.Errorf("error deleting the pci allocation for vf pci address %s: %v", addr, err)
		}
		return false, nil
	}
	netns.Close()
	return true, nil
}
