// Command flannel stands in for flannel's CNI plugin
// (ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3), whose module
// github.com/flannel-io/cni-plugin the proxy refuses. It does what the
// plugin does, read in flannel-io/cni-plugin flannel.go and
// flannel_linux.go at v1.9.1-flannel1: that tag is the newest the stored
// repository has, and both files are the same at its main branch
// (092e6d2, a month later; only Dockerfile.image and go.mod changed), so
// the -flannel3 image builds this code. It links the CNI library upstream
// links (cni v1.3.0, go.mod@v1.9.1-flannel1).
//
// ADD reads the subnet flanneld leased to this node from subnet.env and
// delegates to the bridge plugin (or the delegate's "type") with
// host-local IPAM on that subnet, routes to the flannel networks, the MTU
// and the IP masquerading flanneld asks for, merged into the conf's
// "delegate" map; the delegate conf is kept per container under dataDir
// so DEL hands the delegate exactly what ADD did. CHECK does nothing, as
// upstream's. conformance_test.go holds the inputs, row by row, with what
// upstream does with each.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

const (
	defaultSubnetFile = "/run/flannel/subnet.env"
	defaultDataDir    = "/var/lib/cni/flannel"
)

// netConf is flannel.go NetConf: its "ipam" is a free map (the base of the
// delegate's), "runtimeConfig" is passed on to the delegate.
type netConf struct {
	types.NetConf
	IPAM          map[string]any `json:"ipam,omitempty"`
	SubnetFile    string         `json:"subnetFile"`
	DataDir       string         `json:"dataDir"`
	Delegate      map[string]any `json:"delegate"`
	RuntimeConfig map[string]any `json:"runtimeConfig,omitempty"`
}

// subnetEnv is what flanneld wrote; the pointers are nil when a key is
// absent.
type subnetEnv struct {
	nets, ip6Nets []*net.IPNet
	subnet, ip6   *net.IPNet
	mtu           *uint64
	ipmasq        *bool
}

func loadConf(b []byte) (*netConf, error) {
	n := &netConf{SubnetFile: defaultSubnetFile, DataDir: defaultDataDir}
	if err := json.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("failed to load netconf: %v", err)
	}
	return n, nil
}

// parseCIDRs reads a comma-separated list, keeping the first of equal
// networks (flannel.go isSubnetAlreadyPresent).
func parseCIDRs(v string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, c := range strings.Split(v, ",") {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return nil, err
		}
		dup := false
		for _, have := range out {
			dup = dup || have.String() == n.String()
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out, nil
}

// loadSubnetEnv is flannel.go loadFlannelSubnetEnv. Lines are taken as
// written: KEY=VALUE split at the first '=', nothing trimmed, unknown keys
// ignored, a later line replacing an earlier one. FLANNEL_SUBNET is the
// node's gateway address (10.42.1.1/24); its network is what host-local
// gets. Both families may be there; an IPv4 or an IPv6 network and subnet,
// the MTU and FLANNEL_IPMASQ are all required. A known key without '='
// makes upstream index past the split and crash (a Go panic); the
// stand-in returns an error saying so.
func loadSubnetEnv(path string) (*subnetEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	se := &subnetEnv{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, hasValue := strings.Cut(sc.Text(), "=")
		switch k {
		case "FLANNEL_NETWORK", "FLANNEL_SUBNET", "FLANNEL_IPV6_NETWORK", "FLANNEL_IPV6_SUBNET", "FLANNEL_MTU", "FLANNEL_IPMASQ":
			if !hasValue {
				return nil, fmt.Errorf("%s: line %q has no '=' (upstream panics: index out of range)", path, k)
			}
		}
		switch k {
		case "FLANNEL_NETWORK":
			if se.nets, err = parseCIDRs(v); err != nil {
				return nil, err
			}
		case "FLANNEL_IPV6_NETWORK":
			if se.ip6Nets, err = parseCIDRs(v); err != nil {
				return nil, err
			}
		case "FLANNEL_SUBNET":
			if _, se.subnet, err = net.ParseCIDR(v); err != nil {
				return nil, err
			}
		case "FLANNEL_IPV6_SUBNET":
			if _, se.ip6, err = net.ParseCIDR(v); err != nil {
				return nil, err
			}
		case "FLANNEL_MTU":
			mtu, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, err
			}
			se.mtu = &mtu
		case "FLANNEL_IPMASQ":
			masq := v == "true"
			se.ipmasq = &masq
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var missing []string
	if len(se.nets) == 0 && len(se.ip6Nets) == 0 {
		missing = append(missing, "FLANNEL_NETWORK", "FLANNEL_IPV6_NETWORK")
	}
	if se.subnet == nil && se.ip6 == nil {
		missing = append(missing, "FLANNEL_SUBNET", "FLANNEL_IPV6_SUBNET")
	}
	if se.mtu == nil {
		missing = append(missing, "FLANNEL_MTU")
	}
	if se.ipmasq == nil {
		missing = append(missing, "FLANNEL_IPMASQ")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%v is missing %v", path, strings.Join(missing, ", "))
	}
	return se, nil
}

// delegateIPAM is flannel_linux.go getDelegateIPAM: the conf's own "ipam"
// (type host-local unless it names one), its ranges replaced by the
// leased subnets (IPv4 first), its routes kept and followed by one to each
// flannel network.
func delegateIPAM(n *netConf, se *subnetEnv) (map[string]any, error) {
	ipam := n.IPAM
	if ipam == nil {
		ipam = map[string]any{}
	}
	if _, ok := ipam["type"]; !ok {
		ipam["type"] = "host-local"
	}
	var ranges [][]map[string]any
	for _, sn := range []*net.IPNet{se.subnet, se.ip6} {
		if sn != nil {
			ranges = append(ranges, []map[string]any{{"subnet": sn.String()}})
		}
	}
	ipam["ranges"] = ranges
	routes := []types.Route{}
	if r, ok := ipam["routes"]; ok {
		b, _ := json.Marshal(r)
		if err := json.Unmarshal(b, &routes); err != nil {
			return nil, fmt.Errorf("failed to read IPAM routes: %w", fmt.Errorf("failed to parse ipam.routes: %w", err))
		}
	}
	for _, nw := range append(append([]*net.IPNet{}, se.nets...), se.ip6Nets...) {
		routes = append(routes, types.Route{Dst: *nw})
	}
	ipam["routes"] = routes
	return ipam, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return fmt.Errorf("failed to load flannel netconf file: %w", err)
	}
	se, err := loadSubnetEnv(n.SubnetFile)
	if err != nil {
		//nolint:staticcheck // ST1005: upstream's message, word for word (flannel-io/cni-plugin flannel.go@v1.9.1-flannel1 cmdAdd); Multus shows it to the user.
		return fmt.Errorf("failed to load flannel 'subnet.env' file: %w. Check the flannel pod log for this node.", err)
	}
	d := n.Delegate
	if d == nil {
		d = map[string]any{}
	} else {
		if t, ok := d["type"]; ok {
			if _, isString := t.(string); !isString {
				return fmt.Errorf("'delegate' dictionary, if present, must have (string) 'type' field")
			}
		}
		if _, ok := d["name"]; ok {
			return fmt.Errorf("'delegate' dictionary must not have 'name' field, it'll be set by flannel")
		}
		if _, ok := d["ipam"]; ok {
			return fmt.Errorf("'delegate' dictionary must not have 'ipam' field, it'll be set by flannel")
		}
	}
	if n.RuntimeConfig != nil {
		d["runtimeConfig"] = n.RuntimeConfig
	}
	// flannel_linux.go doCmdAdd.
	d["name"] = n.Name
	if _, ok := d["type"]; !ok {
		d["type"] = "bridge"
	}
	if _, ok := d["ipMasq"]; !ok {
		// flanneld masquerades itself when FLANNEL_IPMASQ is true.
		d["ipMasq"] = !*se.ipmasq
	}
	if _, ok := d["mtu"]; !ok {
		d["mtu"] = *se.mtu
	}
	if d["type"] == "bridge" {
		if _, ok := d["isGateway"]; !ok {
			d["isGateway"] = true
		}
	}
	if n.CNIVersion != "" {
		d["cniVersion"] = n.CNIVersion
	}
	ipam, err := delegateIPAM(n, se)
	if err != nil {
		return fmt.Errorf("failed to assemble Delegate IPAM: %w", err)
	}
	d["ipam"] = ipam

	conf, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("error serializing delegate netconf: %v", err)
	}
	fmt.Fprintf(os.Stderr, "delegateAdd: netconf sent to delegate plugin:\n%s\n", conf)
	if err := saveScratch(args.ContainerID, n.DataDir, conf); err != nil {
		return err
	}
	res, err := invoke.DelegateAdd(context.TODO(), d["type"].(string), conf, nil)
	if err != nil {
		return fmt.Errorf("failed to delegate add: %w", err)
	}
	// The delegate's result, in the version it answered with.
	return res.Print()
}

// saveScratch is flannel.go saveScratchNetConf: <dataDir>/<container>,
// 0600, synced, in a 0700 directory.
func saveScratch(containerID, dataDir string, conf []byte) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dataDir, containerID), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(conf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cmdDel is flannel.go cmdDel and flannel_linux.go doCmdDel: the conf is
// decoded (and fails DEL if it does not), the saved delegate conf read
// (none: success, DEL already ran or ADD never saved one) and handed to its
// delegate. A saved conf that does not parse is kept and DEL succeeds; one
// that parses is removed whatever the delegate answers, its error still
// returned (doCmdDel returns DelegateDel's error without assigning the err
// its deferred cleanup reads).
func cmdDel(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	path := filepath.Join(n.DataDir, args.ContainerID)
	conf, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var saved types.NetConf
	if err := json.Unmarshal(conf, &saved); err != nil {
		fmt.Fprintf(os.Stderr, "failed to parse netconf: %v", err)
		return nil
	}
	defer func() { _ = os.Remove(path) }()
	return invoke.DelegateDel(context.TODO(), saved.Type, conf, nil)
}

// cmdCheck is flannel.go cmdCheck: not implemented upstream, success.
func cmdCheck(*skel.CmdArgs) error { return nil }

func main() {
	about := fmt.Sprintf("CNI Plugin flannel version v1.9.1-flannel3 (%s/%s) commit sriov-lane-standin", runtime.GOOS, runtime.GOARCH)
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}, version.All, about)
}
