package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Conformance: each input the product passes, or could pass, to flannel's
// CNI plugin (the conflist entry libcni hands it, what flanneld writes in
// subnet.env, the CNI environment), with what the plugin does with it,
// read in flannel-io/cni-plugin at v1.9.1-flannel1 (see main.go for why
// that tag), and the stand-in doing exactly that. A row with a deviation
// says how and why the stand-in differs.
// row and checkRows are test/standin/conformances Row and Check, kept here:
// this module links only what flannel-io/cni-plugin links.
type row struct {
	src       string // "repo PATH@TAG"
	what      string // the input, and what upstream does with it
	got       func(t *testing.T) string
	want      string
	deviation string
}

const (
	plugin      = "flannel-io/cni-plugin "
	at          = "@v1.9.1-flannel1"
	flannelGo   = plugin + "flannel.go" + at
	flannelLx   = plugin + "flannel_linux.go" + at
	skelGo      = "containernetworking/cni pkg/skel/skel.go@v1.3.0"
	subnetGo    = "flannel-io/flannel pkg/subnet/subnet.go@v0.28.9 WriteSubnetFile"
	asPlugin    = "FLANNEL_STANDIN_TEST_AS_PLUGIN"
	productConf = `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}}`
)

func TestMain(m *testing.M) {
	if os.Getenv(asPlugin) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func checkRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.what, func(t *testing.T) {
			if r.src == "" || !strings.Contains(r.src, "@") {
				t.Errorf("no repo PATH@TAG source")
			}
			if got := r.got(t); got != r.want {
				msg := fmt.Sprintf("\n  got  %q\n  want %q\n  source %s", got, r.want, r.src)
				if r.deviation != "" {
					msg += "\n  (the stand-in's deviation: " + r.deviation + ")"
				}
				t.Error(msg)
			}
		})
	}
}

// node is a node's view for the plugin: a subnet.env, a data dir and a
// fake delegate (bridge, and ipvlan) in CNI_PATH that keeps the conf it
// was given per command and answers with DELEGATE_RESULT, or fails when
// DELEGATE_FAIL is set.
type node struct{ dir, subnetFile, dataDir, bin string }

func newNode(t *testing.T, subnetEnv string) *node {
	t.Helper()
	// Not t.TempDir: the scripts name it, and test names hold quotes.
	d, err := os.MkdirTemp("", "fcni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	n := &node{dir: d, subnetFile: filepath.Join(d, "subnet.env"), dataDir: filepath.Join(d, "data"), bin: filepath.Join(d, "bin")}
	if subnetEnv != "" {
		if err := os.WriteFile(n.subnetFile, []byte(subnetEnv), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(n.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(d, "default-result.json")
	if err := os.WriteFile(def, []byte(`{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.42.1.5/24"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat > " + d + "/delegate-$CNI_COMMAND.json\n" +
		`if [ -n "$DELEGATE_FAIL" ]; then echo '{"cniVersion":"0.3.1","code":11,"msg":"delegate failed"}'; exit 1; fi` + "\n" +
		`[ "$CNI_COMMAND" != ADD ] && exit 0` + "\n" +
		`if [ -n "$DELEGATE_RESULT" ]; then echo "$DELEGATE_RESULT"; else cat ` + def + `; fi` + "\n"
	for _, name := range []string{"bridge", "ipvlan"} {
		if err := os.WriteFile(filepath.Join(n.bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// conf is c with the node's subnetFile and dataDir set.
func (n *node) conf(c string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(c), &m); err != nil {
		panic(err)
	}
	m["subnetFile"], m["dataDir"] = n.subnetFile, n.dataDir
	b, _ := json.Marshal(m)
	return string(b)
}

// run runs the plugin binary as a runtime does and returns its stdout (the
// result, or the error it printed) and whether it exited 0.
func (n *node) run(t *testing.T, command, conf string, env ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), asPlugin+"=1", "CNI_COMMAND="+command, "CNI_CONTAINERID=c1",
		"CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0", "CNI_PATH="+n.bin), env...)
	cmd.Stdin = strings.NewReader(conf)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(out)), n.dir, "$DIR"), err == nil
}

// delegated is what the delegate got for command, as sorted key=value
// pairs, or why there is none.
func (n *node) delegated(command string) string {
	b, err := os.ReadFile(filepath.Join(n.dir, "delegate-"+command+".json"))
	if err != nil {
		return "no delegate " + command
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "delegate got " + string(b)
	}
	var kv []string
	for k, v := range m {
		j, _ := json.Marshal(v)
		kv = append(kv, k+"="+string(j))
	}
	sort.Strings(kv)
	return strings.Join(kv, " ")
}

func errMsg(out string) string {
	var e struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal([]byte(out), &e) != nil || e.Code == 0 {
		return "no error: " + out
	}
	return fmt.Sprintf("code %d: %s", e.Code, e.Msg)
}

// The subnet.env flanneld v0.28.9 writes for each of the product's IP
// families (k3s's --cluster-cidr, pkg/cni flannel.go net-conf.json).
const (
	envIPv4 = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
	envDual = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_IPV6_NETWORK=fd00:10:42::/56\nFLANNEL_IPV6_SUBNET=fd00:10:42:1::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n"
	envIPv6 = "FLANNEL_IPV6_NETWORK=fd00:10:42::/56\nFLANNEL_IPV6_SUBNET=fd00:10:42:1::1/64\nFLANNEL_MTU=1430\nFLANNEL_IPMASQ=true\n"
)

// add runs ADD of conf on a node with subnetEnv and returns what the
// delegate got, or the error.
func add(subnetEnv, conf string) func(*testing.T) string {
	return func(t *testing.T) string {
		n := newNode(t, subnetEnv)
		out, ok := n.run(t, "ADD", n.conf(conf))
		if !ok {
			return errMsg(out)
		}
		return strings.ReplaceAll(n.delegated("ADD"), n.dir, "$DIR")
	}
}

const bridgeV4 = `cniVersion="0.3.1" hairpinMode=true ipMasq=false ` +
	`ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} ` +
	`isDefaultGateway=true isGateway=true mtu=1450 name="cbr0" type="bridge"`

func TestConformanceAdd(t *testing.T) {
	withDelegate := func(delegate string) string {
		return `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","delegate":` + delegate + `}`
	}
	checkRows(t, []row{
		{flannelGo + " cmdAdd; " + flannelLx + " doCmdAdd; " + subnetGo, "the product's conflist entry (pkg/cni flannel.go) on an ipv4 lane: bridge with host-local on the node's subnet (FLANNEL_SUBNET's network), a route to the flannel network, flanneld's MTU, ipMasq off since flanneld masquerades",
			add(envIPv4, productConf), bridgeV4, ""},
		{flannelLx + " getDelegateIPAM; " + subnetGo, "a dual-stack lane: both subnets as ranges and both networks as routes, IPv4 first",
			add(envDual, productConf), `cniVersion="0.3.1" hairpinMode=true ipMasq=false ` +
				`ipam={"ranges":[[{"subnet":"10.42.1.0/24"}],[{"subnet":"fd00:10:42:1::/64"}]],"routes":[{"dst":"10.42.0.0/16"},{"dst":"fd00:10:42::/56"}],"type":"host-local"} ` +
				`isDefaultGateway=true isGateway=true mtu=1430 name="cbr0" type="bridge"`, ""},
		{flannelLx + " getDelegateIPAM; " + subnetGo, "an ipv6 lane (EnableIPv4 false): only the IPv6 subnet and network",
			add(envIPv6, productConf), `cniVersion="0.3.1" hairpinMode=true ipMasq=false ` +
				`ipam={"ranges":[[{"subnet":"fd00:10:42:1::/64"}]],"routes":[{"dst":"fd00:10:42::/56"}],"type":"host-local"} ` +
				`isDefaultGateway=true isGateway=true mtu=1430 name="cbr0" type="bridge"`, ""},
		{flannelGo + " loadFlannelSubnetEnv (isSubnetAlreadyPresent)", "FLANNEL_NETWORK with several networks, one twice: each once, in order",
			add("FLANNEL_NETWORK=10.42.0.0/16,10.44.0.0/16,10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n", productConf),
			strings.Replace(bridgeV4, `"routes":[{"dst":"10.42.0.0/16"}]`, `"routes":[{"dst":"10.42.0.0/16"},{"dst":"10.44.0.0/16"}]`, 1), ""},
		{flannelGo + " loadFlannelSubnetEnv", "FLANNEL_IPMASQ other than \"true\" (TRUE) is false: the delegate masquerades",
			add(strings.Replace(envIPv4, "IPMASQ=true", "IPMASQ=TRUE", 1), productConf), strings.Replace(bridgeV4, "ipMasq=false", "ipMasq=true", 1), ""},
		{flannelGo + " loadFlannelSubnetEnv", "unknown keys in subnet.env are ignored",
			add("FLANNEL_OTHER=1\n"+envIPv4, productConf), bridgeV4, ""},
		{flannelGo + " cmdAdd", "no subnet.env (flanneld has not leased a subnet yet): refused",
			add("", productConf), "code 999: failed to load flannel 'subnet.env' file: open $DIR/subnet.env: no such file or directory. Check the flannel pod log for this node.", ""},
		{flannelGo + " subnetEnv.missing", "no FLANNEL_MTU: refused",
			add("FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_IPMASQ=true\n", productConf),
			"code 999: failed to load flannel 'subnet.env' file: $DIR/subnet.env is missing FLANNEL_MTU. Check the flannel pod log for this node.", ""},
		{flannelGo + " subnetEnv.missing", "no FLANNEL_IPMASQ: refused",
			add("FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\nFLANNEL_MTU=1450\n", productConf),
			"code 999: failed to load flannel 'subnet.env' file: $DIR/subnet.env is missing FLANNEL_IPMASQ. Check the flannel pod log for this node.", ""},
		{flannelGo + " subnetEnv.missing", "no network and no subnet of either family: refused, naming all four",
			add("FLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n", productConf),
			"code 999: failed to load flannel 'subnet.env' file: $DIR/subnet.env is missing FLANNEL_NETWORK, FLANNEL_IPV6_NETWORK, FLANNEL_SUBNET, FLANNEL_IPV6_SUBNET. Check the flannel pod log for this node.", ""},
		{flannelGo + " loadFlannelSubnetEnv", "values are not trimmed: \"FLANNEL_MTU=1450 \" does not parse",
			add(strings.Replace(envIPv4, "MTU=1450", "MTU=1450 ", 1), productConf),
			"code 999: failed to load flannel 'subnet.env' file: strconv.ParseUint: parsing \"1450 \": invalid syntax. Check the flannel pod log for this node.", ""},
		{flannelGo + " loadFlannelSubnetEnv", "a known key without '=': upstream indexes past the split and panics",
			add("FLANNEL_NETWORK\n"+envIPv4, productConf),
			"code 999: failed to load flannel 'subnet.env' file: $DIR/subnet.env: line \"FLANNEL_NETWORK\" has no '=' (upstream panics: index out of range). Check the flannel pod log for this node.",
			"upstream's plugin crashes with a Go panic (exit 2, no CNI error on stdout); the stand-in fails with an error instead"},
		{flannelGo + " cmdAdd", "a delegate \"type\" that is not a string: refused",
			add(envIPv4, withDelegate(`{"type":1}`)), "code 999: 'delegate' dictionary, if present, must have (string) 'type' field", ""},
		{flannelGo + " cmdAdd", "a delegate \"name\": refused", add(envIPv4, withDelegate(`{"name":"x"}`)),
			"code 999: 'delegate' dictionary must not have 'name' field, it'll be set by flannel", ""},
		{flannelGo + " cmdAdd", "a delegate \"ipam\": refused", add(envIPv4, withDelegate(`{"ipam":{}}`)),
			"code 999: 'delegate' dictionary must not have 'ipam' field, it'll be set by flannel", ""},
		{flannelLx + " doCmdAdd", "no delegate: bridge, isGateway, flanneld's ipMasq and MTU",
			add(envIPv4, `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel"}`),
			`cniVersion="0.3.1" ipMasq=false ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} isGateway=true mtu=1450 name="cbr0" type="bridge"`, ""},
		{flannelLx + " doCmdAdd", "the delegate's own ipMasq, mtu and isGateway are kept",
			add(envIPv4, withDelegate(`{"ipMasq":true,"mtu":1400,"isGateway":false}`)),
			`cniVersion="0.3.1" ipMasq=true ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} isGateway=false mtu=1400 name="cbr0" type="bridge"`, ""},
		{flannelLx + " doCmdAdd", "another delegate type (ipvlan): no isGateway",
			add(envIPv4, withDelegate(`{"type":"ipvlan","master":"eth0"}`)),
			`cniVersion="0.3.1" ipMasq=false ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} master="eth0" mtu=1450 name="cbr0" type="ipvlan"`, ""},
		{flannelLx + " getDelegateIPAM", "the conf's own ipam: its type and routes kept, ranges replaced, the flannel networks' routes appended",
			add(envIPv4, `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","ipam":{"type":"static","ranges":[[{"subnet":"1.2.3.0/24"}]],"routes":[{"dst":"192.168.0.0/16","gw":"10.42.1.1"}]}}`),
			`cniVersion="0.3.1" ipMasq=false ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"192.168.0.0/16","gw":"10.42.1.1"},{"dst":"10.42.0.0/16"}],"type":"static"} isGateway=true mtu=1450 name="cbr0" type="bridge"`, ""},
		{flannelGo + " getIPAMRoutes", "ipam.routes that do not parse: refused",
			add(envIPv4, `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","ipam":{"routes":[{"dst":"nonsense"}]}}`),
			"code 999: failed to assemble Delegate IPAM: failed to read IPAM routes: failed to parse ipam.routes: invalid CIDR address: nonsense", ""},
		{flannelGo + " cmdAdd", "runtimeConfig (a capability libcni passes) goes to the delegate",
			add(envIPv4, `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","runtimeConfig":{"portMappings":[]}}`),
			`cniVersion="0.3.1" ipMasq=false ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} isGateway=true mtu=1450 name="cbr0" runtimeConfig={"portMappings":[]} type="bridge"`, ""},
		{flannelLx + " doCmdAdd", "no cniVersion: the delegate gets none",
			add(envIPv4, `{"name":"cbr0","type":"flannel"}`),
			`ipMasq=false ipam={"ranges":[[{"subnet":"10.42.1.0/24"}]],"routes":[{"dst":"10.42.0.0/16"}],"type":"host-local"} isGateway=true mtu=1450 name="cbr0" type="bridge"`, ""},
		{flannelGo + " loadFlannelNetConf", "unknown keys in the conf are ignored", add(envIPv4, `{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","noSuchKey":1,"delegate":{"hairpinMode":true,"isDefaultGateway":true}}`), bridgeV4, ""},
		{flannelGo + " loadFlannelNetConf", "subnetFile and dataDir default to /run/flannel/subnet.env and /var/lib/cni/flannel",
			func(t *testing.T) string {
				n, err := loadConf([]byte(productConf))
				return fmt.Sprint(n.SubnetFile, " ", n.DataDir, " ", err)
			}, "/run/flannel/subnet.env /var/lib/cni/flannel <nil>", ""},
	})
}

func TestConformanceResultDelCheck(t *testing.T) {
	n := newNode(t, envIPv4)
	saved := filepath.Join(n.dataDir, "c1")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	checkRows(t, []row{
		{flannelGo + " delegateAdd (result.Print)", "ADD prints the delegate's result as it answered, in its version (0.4.0 for a 1.0.0 conf), and keeps the delegate conf, 0600",
			func(t *testing.T) string {
				out, ok := n.run(t, "ADD", n.conf(`{"cniVersion":"1.0.0","name":"cbr0","type":"flannel"}`),
					`DELEGATE_RESULT={"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.42.1.7/24"}]}`)
				fi, err := os.Stat(saved)
				if err != nil {
					return fmt.Sprint(ok, " ", out, " ", err)
				}
				return fmt.Sprint(ok, " ", strings.Join(strings.Fields(out), ""), " ", fi.Mode().Perm())
			}, `true {"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.42.1.7/24"}],"dns":{}} -rw-------`, ""},
		{flannelGo + " cmdDel; " + flannelLx + " doCmdDel", "DEL hands the saved conf to its delegate and removes it",
			func(t *testing.T) string {
				_, ok := n.run(t, "DEL", n.conf(productConf))
				return fmt.Sprint(ok, " ", n.delegated("DEL") == n.delegated("ADD"), " ", exists(saved))
			}, "true true false", ""},
		{flannelLx + " doCmdDel", "DEL again: nothing saved, success without the delegate",
			func(t *testing.T) string {
				_ = os.Remove(filepath.Join(n.dir, "delegate-DEL.json"))
				_, ok := n.run(t, "DEL", n.conf(productConf))
				return fmt.Sprint(ok, " ", n.delegated("DEL"))
			}, "true no delegate DEL", ""},
		{flannelLx + " doCmdDel", "DEL when the delegate fails: its error is returned and the saved conf removed all the same",
			func(t *testing.T) string {
				if out, ok := n.run(t, "ADD", n.conf(productConf)); !ok {
					return "ADD: " + out
				}
				out, ok := n.run(t, "DEL", n.conf(productConf), "DELEGATE_FAIL=1")
				return fmt.Sprint(ok, " ", errMsg(out), " ", exists(saved))
			}, "false code 11: delegate failed false", ""},
		{flannelLx + " doCmdDel", "DEL with a saved conf that does not parse: success, the file kept, no delegate",
			func(t *testing.T) string {
				_ = os.Remove(filepath.Join(n.dir, "delegate-DEL.json"))
				if err := os.WriteFile(saved, []byte("{"), 0o600); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(saved)
				_, ok := n.run(t, "DEL", n.conf(productConf))
				return fmt.Sprint(ok, " ", exists(saved), " ", n.delegated("DEL"))
			}, "true true no delegate DEL", ""},
		{flannelGo + " cmdDel (loadFlannelNetConf)", "DEL of a conf that does not decode (delegate not a map): refused",
			func(t *testing.T) string {
				out, ok := n.run(t, "DEL", n.conf(`{"cniVersion":"0.3.1","name":"cbr0","type":"flannel","delegate":"x"}`))
				return fmt.Sprint(ok, " ", errMsg(out))
			}, "false code 999: failed to load netconf: json: cannot unmarshal string into Go struct field netConf.delegate of type map[string]interface {}", "the struct name in the message is the stand-in's"},
		{flannelLx + " delegateAdd", "ADD whose delegate fails: refused, the saved conf left for DEL",
			func(t *testing.T) string {
				out, ok := n.run(t, "ADD", n.conf(productConf), "DELEGATE_FAIL=1")
				defer os.Remove(saved)
				return fmt.Sprint(ok, " ", errMsg(out), " ", exists(saved))
			}, "false code 11: delegate failed true", ""},
		{flannelGo + " cmdCheck", "CHECK (1.0.0 conf) does nothing: success, whatever is saved",
			func(t *testing.T) string {
				out, ok := n.run(t, "CHECK", n.conf(`{"cniVersion":"1.0.0","name":"cbr0","type":"flannel"}`))
				return fmt.Sprint(ok, " ", out)
			}, "true ", ""},
		{skelGo + " pluginMain", "CHECK of the product's 0.3.1 conf: refused by the library",
			func(t *testing.T) string {
				out, ok := n.run(t, "CHECK", n.conf(productConf))
				return fmt.Sprint(ok, " ", errMsg(out))
			}, "false code 1: config version does not allow CHECK", ""},
		{skelGo + " checkVersionAndCall", "a cniVersion the library does not support: refused",
			func(t *testing.T) string {
				out, ok := n.run(t, "ADD", n.conf(`{"cniVersion":"2.0.0","name":"cbr0","type":"flannel"}`))
				return fmt.Sprint(ok, " ", errMsg(out))
			}, "false code 1: incompatible CNI versions", ""},
		{flannelGo + " main; containernetworking/cni pkg/version/plugin.go@v1.3.0", "VERSION: the library's version.All",
			func(t *testing.T) string {
				out, ok := n.run(t, "VERSION", "")
				return fmt.Sprint(ok, " ", out)
			}, `true {"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`, ""},
	})
}
