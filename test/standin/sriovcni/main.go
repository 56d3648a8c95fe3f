package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
)

// defaultCNIDir is pkg/config/config.go DefaultCNIDir.
const defaultCNIDir = "/var/lib/cni/sriov"

//nolint:gochecknoinits // the lock must be taken before main runs, on the thread group leader, as k8snetworkplumbingwg/sriov-cni cmd/sriov/main.go@v2.10.0 does in init.
func init() {
	// Namespace switches are per thread: keep main on the main thread, as
	// cmd/sriov/main.go does.
	runtime.LockOSThread()
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}, version.All, "")
}

// plugin holds where the plugin reads and writes.
type plugin struct {
	sysfs, cniDir string
}

func newPlugin() (*plugin, error) {
	p := &plugin{sysfs: os.Getenv("SRIOV_CNI_STANDIN_SYSFS"), cniDir: os.Getenv("SRIOV_CNI_STANDIN_DIR")}
	if p.cniDir == "" {
		p.cniDir = defaultCNIDir
	}
	if p.sysfs == "" {
		var err error
		if p.sysfs, err = rigsysfs.Find(); err != nil {
			return nil, fmt.Errorf("sriov (stand-in): %w", err)
		}
	}
	return p, nil
}

// envArgs is CNI_ARGS as pkg/cnicommands/cni.go reads it: MAC=...
type envArgs struct {
	types.CommonArgs
	MAC types.UnmarshallableString `json:"mac,omitempty"`
}

func cmdAdd(args *skel.CmdArgs) error {
	p, err := newPlugin()
	if err != nil {
		return err
	}
	return p.add(args)
}

func cmdDel(args *skel.CmdArgs) error {
	p, err := newPlugin()
	if err != nil {
		return err
	}
	return p.del(args)
}

// cmdCheck is pkg/cnicommands/cni.go CmdCheck: nothing.
func cmdCheck(*skel.CmdArgs) error { return nil }

// setLogging is pkg/config/config.go SetLogging, which ADD and DEL call
// first: the conf must decode into NetConf (DEL fails here too, even
// without a cache). The stand-in writes errors only, to stderr, whatever
// logLevel and logFile say.
func setLogging(stdin []byte) error {
	if err := json.Unmarshal(stdin, &netConf{}); err != nil {
		return fmt.Errorf("SetLogging(): failed to load netconf: %v", err)
	}
	return nil
}

// add is pkg/cnicommands/cni.go CmdAdd, in its order. As there, cleanup on
// failure (the VF back out of the pod, IPAM released) covers the steps
// after the VF's state was recorded.
func (p *plugin) add(args *skel.CmdArgs) error {
	if err := setLogging(args.StdinData); err != nil {
		return err
	}
	n, err := p.loadConf(args.StdinData)
	if err != nil {
		return fmt.Errorf("SRIOV-CNI failed to load netconf: %v", err)
	}
	if args.Args != "" {
		e := envArgs{}
		if err := types.LoadArgs(args.Args, &e); err != nil {
			return fmt.Errorf("SRIOV-CNI failed to parse args: %v", err)
		}
		if e.MAC != "" {
			n.MAC = string(e.MAC)
		}
	}
	// RuntimeConfig takes precedence over CNI_ARGS.
	if n.RuntimeConfig.Mac != "" {
		n.MAC = n.RuntimeConfig.Mac
	}
	n.MAC = strings.ToLower(n.MAC)

	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("failed to open netns %q: %v", args.Netns, err)
	}
	defer netns.Close()

	// FillOriginalVfInfo: the PF must be a link here. Its VF table would
	// give the VF's administrative state; a stand-in PF has none, which
	// reads as an entry with nothing set.
	pfLink, err := netlink.LinkByName(n.Master)
	if err != nil {
		return fmt.Errorf("failed to get original vf information: failed to lookup master %q: %v", n.Master, err)
	}
	n.OrigVfState.fillUnset()
	if n.OrigVfState.HostIFName != "" {
		vfLink, err := netlink.LinkByName(n.OrigVfState.HostIFName)
		if err != nil {
			return fmt.Errorf("failed to get original vf information: failed to lookup vf %q: %v", n.OrigVfState.HostIFName, err)
		}
		n.OrigVfState.MTU = vfLink.Attrs().MTU
	}
	defer func() {
		if err != nil {
			if e := netns.Do(func(ns.NetNS) error { _, e := netlink.LinkByName(args.IfName); return e }); e == nil {
				_ = p.releaseVF(n, args.IfName, netns)
			}
		}
	}()
	// ApplyVFConfig: its checks, and what the stand-in cannot set
	// refused (applyVFConfig). Its error does not reach the cleanup
	// above, as upstream's shadowed err does not.
	if err := n.applyVFConfig(); err != nil {
		return fmt.Errorf("SRIOV-CNI failed to configure VF %q", err)
	}
	// It reports the PF's MTU, which a netdev VF's replaces.
	pfMTU := pfLink.Attrs().MTU
	n.MTU = &pfMTU

	result := &current.Result{Interfaces: []*current.Interface{{Name: args.IfName, Sandbox: netns.Path()}}}
	if !n.DPDKMode {
		if err = p.setupVF(n, args.IfName, netns); err != nil {
			return fmt.Errorf("failed to set up pod interface %q from the device %q: %v", args.IfName, n.Master, err)
		}
	}
	result.Interfaces[0].Mac = n.macForResult()
	if n.MTU != nil {
		result.Interfaces[0].Mtu = *n.MTU
	}

	if n.IPAM.Type != "" {
		var r types.Result
		r, err = ipam.ExecAdd(n.IPAM.Type, args.StdinData)
		if err != nil {
			return fmt.Errorf("failed to set up IPAM plugin type %q from the device %q: %v", n.IPAM.Type, n.Master, err)
		}
		defer func() {
			if err != nil {
				_ = ipam.ExecDel(n.IPAM.Type, args.StdinData)
			}
		}()
		var res *current.Result
		if res, err = current.NewResultFromResult(r); err != nil {
			return err
		}
		if len(res.IPs) == 0 {
			err = errors.New("IPAM plugin returned missing IP config")
			return err
		}
		res.Interfaces = result.Interfaces
		for _, ipc := range res.IPs {
			ipc.Interface = current.Int(0)
		}
		if !n.DPDKMode {
			if err = netns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(args.IfName, res) }); err != nil {
				return err
			}
		}
		result = res
	}

	if err = p.saveNetConf(args, n); err != nil {
		return fmt.Errorf("error saving NetConf %q", err)
	}
	if err = p.saveAllocatedPCI(n.DeviceID, args.Netns); err != nil {
		return fmt.Errorf("error saving the pci allocation for vf pci address %s: %v", n.DeviceID, err)
	}
	return types.PrintResult(result, n.CNIVersion)
}

// del is pkg/cnicommands/cni.go CmdDel, quirks included: without a cache
// it succeeds (kubelet retries DELs); the cache goes even when DEL fails
// after the lock and IPAM, as upstream's shadowed err lets it; and since
// DPDKMode is not cached, a DPDK VF's DEL looks for CNI_IFNAME in the pod,
// fails once, and the retry finds no cache and succeeds (its PCI
// allocation file stays until an ADD finds the netns gone).
func (p *plugin) del(args *skel.CmdArgs) error {
	if err := setLogging(args.StdinData); err != nil {
		return err
	}
	n, ref, err := p.loadConfFromCache(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sriov (stand-in): cmdDel: cannot load config file from cache: %v\n", err)
		return nil
	}
	if err := p.lock(n.DeviceID); err != nil {
		return fmt.Errorf("cmdDel() error obtaining lock for device [%s]: %w", n.DeviceID, err)
	}
	cleanCache := true
	defer func() {
		if cleanCache {
			if err := os.Remove(ref); err != nil {
				fmt.Fprintf(os.Stderr, "sriov (stand-in): error removing NetConf file %s: %v\n", ref, err)
			}
		}
	}()
	if n.IPAM.Type != "" {
		if err := ipam.ExecDel(n.IPAM.Type, args.StdinData); err != nil {
			cleanCache = false
			return err
		}
	}
	if args.Netns == "" {
		return nil
	}
	if _, err := p.vfID(n.DeviceID, n.Master); err != nil {
		return fmt.Errorf("cmdDel() error obtaining VF ID: %q", err)
	}
	// ResetVFConfig: nothing was set through the PF (see applyVFConfig),
	// but it looks the PF up first.
	if _, err := netlink.LinkByName(n.Master); err != nil {
		return fmt.Errorf("cmdDel() error reseting VF: %q", fmt.Errorf("failed to lookup master %q: %v", n.Master, err))
	}
	if !n.DPDKMode {
		netns, err := ns.GetNS(args.Netns)
		if err != nil {
			var gone ns.NSPathNotExistErr
			if errors.As(err, &gone) {
				return nil
			}
			return fmt.Errorf("failed to open netns %s: %q", args.Netns, err)
		}
		defer netns.Close()
		if err := p.releaseVF(n, args.IfName, netns); err != nil {
			return err
		}
	}
	if err := p.deleteAllocatedPCI(n.DeviceID); err != nil {
		cleanCache = false
		return fmt.Errorf("error cleaning the pci allocation for vf pci address %s: %v", n.DeviceID, err)
	}
	return nil
}

// setupVF is pkg/sriov/sriov.go SetupVF: down, a temporary name, the
// original name dropped from the alternative names, into the pod's netns,
// CNI_IFNAME, ARP and ND notify, the MAC, optimistic DAD, up.
func (p *plugin) setupVF(n *netConf, podIfName string, netns ns.NetNS) error {
	name := n.OrigVfState.HostIFName
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("error getting VF netdevice with name %s", name)
	}
	n.OrigVfState.EffectiveMAC = link.Attrs().HardwareAddr.String()
	tempName := fmt.Sprintf("temp_%d", link.Attrs().Index)
	if err := netlink.LinkSetDown(link); err != nil {
		return fmt.Errorf("failed to down vf device %q: %v", name, err)
	}
	if err := netlink.LinkSetName(link, tempName); err != nil {
		return fmt.Errorf("error setting temp IF name %s for %s", tempName, name)
	}
	if link, err = netlink.LinkByName(tempName); err != nil {
		return fmt.Errorf("error getting VF netdevice with name %s: %v", tempName, err)
	}
	for _, alt := range link.Attrs().AltNames {
		if alt == name {
			if err := netlink.LinkDelAltName(link, name); err != nil {
				return fmt.Errorf("error removing VF altname %s: %v", name, err)
			}
		}
	}
	if err := netlink.LinkSetNsFd(link, int(netns.Fd())); err != nil {
		return fmt.Errorf("failed to move IF %s to netns: %q", tempName, err)
	}
	if err := netns.Do(func(ns.NetNS) error {
		if err := netlink.LinkSetName(link, podIfName); err != nil {
			return fmt.Errorf("error setting container interface name %s for %s", name, tempName)
		}
		_ = writeSysctl("/proc/sys/net/ipv4/conf/"+podIfName+"/arp_notify", "1")
		_ = writeSysctl("/proc/sys/net/ipv6/conf/"+podIfName+"/ndisc_notify", "1")
		if n.MAC != "" {
			if err := setEffectiveMAC(podIfName, n.MAC); err != nil {
				return fmt.Errorf("failed to set netlink MAC address to %s: %v", n.MAC, err)
			}
		}
		_ = writeSysctl("/proc/sys/net/ipv6/conf/"+podIfName+"/optimistic_dad", "1")
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("error bringing interface up in container ns: %q", err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("error setting up interface in container namespace: %q", err)
	}
	mtu := link.Attrs().MTU
	n.MTU = &mtu
	return nil
}

// releaseVF is pkg/sriov/sriov.go ReleaseVF: in the pod's netns, down, the
// original name, the original MAC if one was set, the original MTU, and
// back to the netns the plugin runs in (the node's). It is not brought up.
func (p *plugin) releaseVF(n *netConf, podIfName string, netns ns.NetNS) error {
	initns, err := ns.GetCurrentNS()
	if err != nil {
		return fmt.Errorf("failed to get init netns: %v", err)
	}
	defer initns.Close()
	return netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(podIfName)
		if err != nil {
			return fmt.Errorf("failed to get netlink device with name %s: %q", podIfName, err)
		}
		if err := netlink.LinkSetDown(link); err != nil {
			return fmt.Errorf("failed to set link %s down: %q", podIfName, err)
		}
		if err := netlink.LinkSetName(link, n.OrigVfState.HostIFName); err != nil {
			return fmt.Errorf("failed to rename link %s to host name %s: %q", podIfName, n.OrigVfState.HostIFName, err)
		}
		if n.MAC != "" {
			if err := setEffectiveMAC(n.OrigVfState.HostIFName, n.OrigVfState.EffectiveMAC); err != nil {
				return fmt.Errorf("failed to restore original effective netlink MAC address %s: %v", n.OrigVfState.EffectiveMAC, err)
			}
		}
		if n.OrigVfState.MTU != 0 {
			if err := netlink.LinkSetMTU(link, n.OrigVfState.MTU); err != nil {
				return fmt.Errorf("failed to reset MTU for link link %s: %q", n.OrigVfState.HostIFName, err)
			}
		}
		if err := netlink.LinkSetNsFd(link, int(initns.Fd())); err != nil {
			return fmt.Errorf("failed to move interface %s to init netns: %v", n.OrigVfState.HostIFName, err)
		}
		return nil
	})
}

// setEffectiveMAC is pkg/utils/utils.go SetVFEffectiveMAC: set and check,
// up to 20 times 100 ms apart.
func setEffectiveMAC(ifName, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("failed to parse MAC address %s: %v", mac, err)
	}
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		return err
	}
	for range 20 {
		if err = netlink.LinkSetHardwareAddr(link, hw); err == nil {
			var l netlink.Link
			if l, err = netlink.LinkByName(ifName); err == nil {
				if l.Attrs().HardwareAddr.String() == mac {
					return nil
				}
				err = fmt.Errorf("effective mac address is different from requested one")
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func writeSysctl(path, value string) error {
	return os.WriteFile(path, []byte(value), os.ModeAppend)
}
