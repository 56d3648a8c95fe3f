// Command flannel stands in for flannel's CNI plugin
// (ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3), whose module
// github.com/flannel-io/cni-plugin the proxy refuses. It does the plugin's
// documented job: read the subnet flanneld leased to this node from
// /run/flannel/subnet.env and delegate to the bridge plugin with
// host-local IPAM on that subnet, a route to the flannel network, the MTU
// and IP masquerading flanneld asks for, merged under the conf's
// "delegate" map; the delegate conf is kept per container under
// /var/lib/cni/flannel so DEL releases exactly what ADD set up.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
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

type netConf struct {
	types.NetConf
	SubnetFile string         `json:"subnetFile"`
	DataDir    string         `json:"dataDir"`
	Delegate   map[string]any `json:"delegate"`
}

type subnetEnv struct {
	network, subnet string
	mtu             int
	ipmasq          bool
}

func loadConf(b []byte) (*netConf, error) {
	n := &netConf{SubnetFile: defaultSubnetFile, DataDir: defaultDataDir}
	if err := json.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("parsing flannel conf: %w", err)
	}
	return n, nil
}

func loadSubnetEnv(path string) (*subnetEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s (is flanneld running on this node?): %w", path, err)
	}
	defer f.Close()
	se := &subnetEnv{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch k {
		case "FLANNEL_NETWORK":
			se.network = v
		case "FLANNEL_SUBNET":
			// flanneld writes the node's gateway address (10.42.1.1/24);
			// host-local wants the network (10.42.1.0/24).
			_, n, err := net.ParseCIDR(v)
			if err != nil {
				return nil, fmt.Errorf("%s: FLANNEL_SUBNET=%q: %w", path, v, err)
			}
			se.subnet = n.String()
		case "FLANNEL_MTU":
			if se.mtu, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("%s: FLANNEL_MTU=%q: %w", path, v, err)
			}
		case "FLANNEL_IPMASQ":
			se.ipmasq = v == "true"
		}
	}
	if se.network == "" || se.subnet == "" {
		return nil, fmt.Errorf("%s lacks FLANNEL_NETWORK or FLANNEL_SUBNET", path)
	}
	return se, sc.Err()
}

// delegateConf builds the bridge conf for this node's subnet.
func delegateConf(n *netConf, se *subnetEnv) map[string]any {
	d := map[string]any{}
	for k, v := range n.Delegate {
		d[k] = v
	}
	d["name"] = n.Name
	d["cniVersion"] = n.CNIVersion
	if _, ok := d["type"]; !ok {
		d["type"] = "bridge"
	}
	if _, ok := d["ipMasq"]; !ok {
		// flanneld masquerades itself when FLANNEL_IPMASQ is true.
		d["ipMasq"] = !se.ipmasq
	}
	if _, ok := d["mtu"]; !ok && se.mtu > 0 {
		d["mtu"] = se.mtu
	}
	if d["type"] == "bridge" {
		if _, ok := d["isGateway"]; !ok {
			d["isGateway"] = true
		}
	}
	d["ipam"] = map[string]any{
		"type":   "host-local",
		"ranges": [][]map[string]string{{{"subnet": se.subnet}}},
		"routes": []map[string]string{{"dst": se.network}},
	}
	return d
}

func cmdAdd(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	se, err := loadSubnetEnv(n.SubnetFile)
	if err != nil {
		return err
	}
	d := delegateConf(n, se)
	conf, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.DataDir, args.ContainerID), conf, 0o600); err != nil {
		return err
	}
	typ, _ := d["type"].(string)
	res, err := invoke.DelegateAdd(context.TODO(), typ, conf, nil)
	if err != nil {
		return err
	}
	return types.PrintResult(res, n.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	path := filepath.Join(n.DataDir, args.ContainerID)
	conf, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil // nothing was set up, or DEL already ran
	}
	if err != nil {
		return err
	}
	var d map[string]any
	if err := json.Unmarshal(conf, &d); err != nil {
		return fmt.Errorf("parsing saved delegate conf %s: %w", path, err)
	}
	typ, _ := d["type"].(string)
	if err := invoke.DelegateDel(context.TODO(), typ, conf, nil); err != nil {
		return err
	}
	return os.Remove(path)
}

func cmdCheck(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	conf, err := os.ReadFile(filepath.Join(n.DataDir, args.ContainerID))
	if err != nil {
		return err
	}
	var d map[string]any
	if err := json.Unmarshal(conf, &d); err != nil {
		return err
	}
	typ, _ := d["type"].(string)
	return invoke.DelegateCheck(context.TODO(), typ, conf, nil)
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}, version.All, "flannel CNI plugin (sriov-lane stand-in)")
}
