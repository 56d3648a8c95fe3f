package main

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/provider"

	"github.com/sriov-lane/sriov-lane/test/apiserver"
)

// Conformance of the stand-in k3s: one row per argument or environment
// variable the product (pkg/provider/clusterconfig.go) or k3d v5.9.0 itself
// hands a node, with what k3s does with it, where that was read, and a
// check that the stand-in does exactly that, on what it computes (the
// kubelet, kube-proxy, kube-apiserver and controller-manager argv, the
// files it writes). A row whose stand-in field is set is where the stand-in
// must differ, with how and why. k3s is cited at the pinned tag
// v1.35.5+k3s1 where it was read there (commit 6a4781ad, from a fork's
// snapshot: k3s-io/k3s itself is too big to fetch), else by the stored
// commit or stored version id read.
type row struct {
	input   string // the argument or variable, and who passes it
	src     string // where k3s's (or k3d's) behaviour was read
	k3s     string // what k3s does with it
	standin string // "" when the stand-in does the same; else how and why it differs
	check   func(t *testing.T)
}

func checkRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		cited := strings.Contains(r.src, "@") || strings.Contains(r.src, "stored version id")
		if r.src == "" || !cited || r.k3s == "" || r.check == nil {
			t.Errorf("row %q lacks a cited source, k3s's behaviour or a check", r.input)
			continue
		}
		t.Run(r.input, r.check)
	}
}

func mustFlags(t *testing.T, role string, args ...string) k3sFlags {
	t.Helper()
	f, err := parseFlags(role, args)
	if err != nil {
		t.Fatalf("k3s %s %q: %v", role, args, err)
	}
	return f
}

func argValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func cidrsOf(t *testing.T, s ...string) []*net.IPNet {
	t.Helper()
	n, err := parseCIDRs("cidr", s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ipsOf(s ...string) []net.IP {
	var out []net.IP
	for _, v := range s {
		out = append(out, net.ParseIP(v))
	}
	return out
}

func detector(primary, ipv6 string) hostDetector {
	return hostDetector{
		primary: func() (net.IP, error) { return net.ParseIP(primary), nil },
		ipv6: func() (net.IP, error) {
			if ipv6 == "" {
				return nil, os.ErrNotExist
			}
			return net.ParseIP(ipv6), nil
		},
	}
}

func TestConformanceWithK3s(t *testing.T) {
	checkRows(t, []row{
		{
			input: "K3S_TOKEN (k3d, every node)",
			src:   "k3d-io/k3d pkg/client/cluster.go@v5.9.0 (GlobalEnv); k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1 (--token EnvVar K3S_TOKEN; urfave/cli applies the variable as the default)",
			k3s:   "the cluster token; a --token on the command line wins over the variable",
			check: func(t *testing.T) {
				t.Setenv("K3S_TOKEN", "from-env")
				if got := flagOrEnv(mustFlags(t, "agent").token, "K3S_TOKEN"); got != "from-env" {
					t.Errorf("token %q", got)
				}
				if got := flagOrEnv(mustFlags(t, "agent", "-t", "from-flag").token, "K3S_TOKEN"); got != "from-flag" {
					t.Errorf("token %q, want the flag's", got)
				}
			},
		},
		{
			input: "K3S_URL (k3d, agents)",
			src:   "k3d-io/k3d pkg/client/cluster.go@v5.9.0 (https://k3d-<name>-server-0:6443); k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1 (--server EnvVar K3S_URL)",
			k3s:   "the server an agent joins; --server wins; the name resolves with the node's resolver only",
			standin: "kubelet gets the server's address resolved once, of the node's first address family, where k3s gives it " +
				"its local load balancer; the stand-in has no load balancer. A name that does not resolve keeps the agent out, as with k3s",
			check: func(t *testing.T) {
				t.Setenv("K3S_URL", "https://k3d-x-server-0:6443")
				if got := flagOrEnv(mustFlags(t, "agent", "-s", "https://other:6443").server, "K3S_URL"); got != "https://other:6443" {
					t.Errorf("server %q, want the flag's", got)
				}
				if got := pickAddress([]string{"fd00::2", "172.18.0.2"}, net.ParseIP("172.18.0.3")); got != "172.18.0.2" {
					t.Errorf("picked %s for an IPv4-first node", got)
				}
				if got := pickAddress([]string{"172.18.0.2", "fd00::2"}, net.ParseIP("fd00::3")); got != "fd00::2" {
					t.Errorf("picked %s for an IPv6-first node", got)
				}
				if u, err := resolveURL(t.Context(), "https://[fd00::2]:6443", net.ParseIP("fd00::3")); err != nil || u != "https://[fd00::2]:6443" {
					t.Errorf("literal address URL became %q, %v", u, err)
				}
			},
		},
		{
			input: "K3S_KUBECONFIG_OUTPUT=/output/kubeconfig.yaml (k3d, every node)",
			src:   "k3d-io/k3d pkg/types/defaults.go@v5.9.0 DefaultNodeEnv; k3s-io/k3s pkg/server/server.go@v1.35.5+k3s1 writeKubeConfig",
			k3s:   "the admin kubeconfig is written there and /etc/rancher/k3s/k3s.yaml becomes a symlink to it; without it, k3s.yaml itself",
			check: func(t *testing.T) {
				dir := t.TempDir()
				out, global := filepath.Join(dir, "output", "kubeconfig.yaml"), filepath.Join(dir, "etc", "k3s.yaml")
				if err := os.MkdirAll(filepath.Dir(global), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(global, []byte("stale"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := writeKubeconfig([]byte("kc"), out, global); err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(out); string(b) != "kc" {
					t.Errorf("output holds %q", b)
				}
				if l, err := os.Readlink(global); err != nil || l != out {
					t.Errorf("%s links to %q (%v), want %s", global, l, err, out)
				}
				if err := writeKubeconfig([]byte("kc2"), "", global); err != nil {
					t.Fatal(err)
				}
				if fi, _ := os.Lstat(global); fi == nil || fi.Mode()&os.ModeSymlink != 0 {
					t.Errorf("without K3S_KUBECONFIG_OUTPUT %s must be the file itself", global)
				}
			},
		},
		{
			input: "a list flag's items (--cluster-cidr, --service-cidr, --cluster-dns, --tls-san, --disable)",
			src:   "k3s-io/k3s pkg/util/client.go@v1.35.5+k3s1 SplitStringSlice; pkg/cli/server/server.go@v1.35.5+k3s1",
			k3s:   "split at commas and nothing more: a space-padded or blank CIDR or DNS address is refused at start; only --disable's items are trimmed",
			check: func(t *testing.T) {
				for _, v := range []string{"10.42.0.0/16, fd00:10:42::/56", "10.42.0.0/16,"} {
					if _, err := parseCIDRs("cluster-cidr", []string{v}); err == nil || !strings.Contains(err.Error(), "invalid cluster-cidr") {
						t.Errorf("--cluster-cidr %q: %v, want refused as k3s refuses it", v, err)
					}
				}
				if f := mustFlags(t, "server", "--disable= traefik ,servicelb"); !reflect.DeepEqual(f.disable, []string{"traefik", "servicelb"}) {
					t.Errorf("--disable items %q, want each trimmed", f.disable)
				}
			},
		},
		{
			input:   "--tls-san HOST (k3d, server)",
			src:     "k3d-io/k3d pkg/client/node.go@v5.9.0 patchServerSpec; k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1",
			k3s:     "each item, split at commas, is a SAN beside 127.0.0.1, ::1, localhost, the node name and every node address",
			standin: "0.0.0.0 and host.k3d.internal are SANs too, for the rig's host-side clients",
			check: func(t *testing.T) {
				f := mustFlags(t, "server", "--tls-san", "127.0.0.1", "--tls-san=a.example,b.example")
				sans := serverSANs("k3d-x-server-0", f.tlsSANs, ipsOf("172.18.0.2", "fd00::2"))
				for _, want := range []string{"a.example", "b.example", "127.0.0.1", "::1", "localhost", "k3d-x-server-0", "172.18.0.2", "fd00::2"} {
					if !slices.Contains(sans, want) {
						t.Errorf("SANs %v lack %s", sans, want)
					}
				}
			},
		},
		{
			input: "--node-label K=V (k3d's nodeLabels)",
			src:   "k3d-io/k3d pkg/client/node.go@v5.9.0 NodeCreate; k3s-io/k3s pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1 kubeletArgsAndConfig; pkg/agent/run.go@v1.35.5+k3s1 updateMutableLabels",
			k3s:   "every item goes to kubelet's --node-labels unchanged, joined with commas (kubelet refuses kubernetes.io labels outside its set); once the Node exists each item, split at its first =, is patched onto it",
			check: func(t *testing.T) {
				f := mustFlags(t, "agent", "--node-label", "sriov_capable=true", "--node-label=node-role.kubernetes.io/worker=worker")
				got := argValues(kubeletArgs(nodeOptions{name: "n", flags: f}), "node-labels")
				if want := []string{"sriov_capable=true,node-role.kubernetes.io/worker=worker"}; !reflect.DeepEqual(got, want) {
					t.Errorf("--node-labels %q, want %q (unfiltered)", got, want)
				}
				if got := argValues(kubeletArgs(nodeOptions{name: "n"}), "node-labels"); !reflect.DeepEqual(got, []string{""}) {
					t.Errorf("without labels --node-labels %q, want k3s's empty value", got)
				}
				if want := map[string]string{"sriov_capable": "true", "node-role.kubernetes.io/worker": "worker"}; !reflect.DeepEqual(f.labels(), want) {
					t.Errorf("API labels %v", f.labels())
				}
			},
		},
		{
			input: "--node-taint K=V:EFFECT",
			src:   "k3s-io/k3s pkg/daemons/agent/agent.go@v1.35.5+k3s1 defaultKubeletConfig; kubernetes/kubernetes pkg/util/flag/flags.go@v1.36.3 RegisterWithTaintsVar",
			k3s:   "parsed with taints.ParseTaints into kubelet's registerWithTaints; a bad taint stops the agent",
			standin: "passed as kubelet's --register-with-taints, which kubelet parses with the same ParseTaints and refuses alike; " +
				"the stand-in writes no KubeletConfiguration from Go types",
			check: func(t *testing.T) {
				f := mustFlags(t, "agent", "--node-taint=a=b:NoSchedule", "--node-taint", "c:NoExecute")
				if got := argValues(kubeletArgs(nodeOptions{name: "n", flags: f}), "register-with-taints"); !reflect.DeepEqual(got, []string{"a=b:NoSchedule,c:NoExecute"}) {
					t.Errorf("--register-with-taints %q", got)
				}
			},
		},
		{
			input: "--kubelet-arg K=V (product: CPU and topology manager, reservations, fail-cgroupv1=false)",
			src:   "k3s-io/k3s pkg/util/args.go@v1.35.5+k3s1 GetArgs; pkg/daemons/agent/agent.go@v1.35.5+k3s1 startKubelet",
			k3s:   "merged over k3s's kubelet defaults by GetArgs: replace, repeat, += appends, -= prepends, sorted",
			check: func(t *testing.T) {
				f := mustFlags(t, "agent", "--kubelet-arg=cpu-manager-policy=static", "--kubelet-arg", "kube-reserved=cpu=500m",
					"--kubelet-arg=--read-only-port=10255", "--kubelet-arg=feature-gates+=A=true", "--kubelet-arg=feature-gates+=B=true")
				args := kubeletArgs(nodeOptions{name: "n", flags: f})
				for name, want := range map[string][]string{
					"cpu-manager-policy": {"static"}, "kube-reserved": {"cpu=500m"}, "read-only-port": {"10255"},
					"feature-gates": {"A=true", "B=true"}, "hostname-override": {"n"},
				} {
					if got := argValues(args, name); !reflect.DeepEqual(got, want) {
						t.Errorf("--%s %q, want %q; argv %q", name, got, want, args)
					}
				}
				if !slices.IsSorted(args) {
					t.Errorf("argv not sorted by key: %q", args)
				}
			},
		},
		{
			input: "kubelet's node-ip and cloud provider (no flag)",
			src:   "k3s-io/k3s pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1 kubeletArgsAndConfig",
			k3s:   "with its embedded cloud controller (the default) kubelet gets cloud-provider=external and node-ip = every node address",
			standin: "no cloud-provider: the stand-in runs no cloud controller, which would keep the Node tainted uninitialised; " +
				"node-ip is every node address, which kubelet then reports as k3s's controller would",
			check: func(t *testing.T) {
				args := kubeletArgs(nodeOptions{name: "n", ips: ipsOf("fd00::3", "172.18.0.3")})
				if got := argValues(args, "node-ip"); !reflect.DeepEqual(got, []string{"fd00::3,172.18.0.3"}) {
					t.Errorf("--node-ip %q", got)
				}
				if got := argValues(args, "cloud-provider"); got != nil {
					t.Errorf("--cloud-provider %q", got)
				}
			},
		},
		{
			input: "--kube-proxy-arg K=V",
			src:   "k3s-io/k3s pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1 kubeProxyArgs; pkg/util/args.go@v1.35.5+k3s1 GetArgs",
			k3s:   "merged over kube-proxy's defaults (iptables, health on the node family's loopback, every cluster CIDR, conntrack left alone)",
			check: func(t *testing.T) {
				f := mustFlags(t, "agent", "--kube-proxy-arg=proxy-mode=nftables")
				args := kubeProxyArgs(nodeOptions{name: "n", ips: ipsOf("fd00::3", "172.18.0.3"), clusterCIDR: "fd00:10:42::/56", flags: f})
				for name, want := range map[string]string{"proxy-mode": "nftables", "healthz-bind-address": "::1", "cluster-cidr": "fd00:10:42::/56", "conntrack-max-per-core": "0"} {
					if got := argValues(args, name); !reflect.DeepEqual(got, []string{want}) {
						t.Errorf("--%s %q, want %s", name, got, want)
					}
				}
			},
		},
		{
			input: "--cluster-cidr CIDR[,CIDR] (product, server)",
			src:   "k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1; pkg/util/net.go@v1.35.5+k3s1 GetDefaultAddresses",
			k3s:   "every item parsed (a bad one stops the server); the first is the primary; default 10.42.0.0/16, or fd00:42::/56 on an IPv6-first node",
			check: func(t *testing.T) {
				f := mustFlags(t, "server", "--cluster-cidr=10.42.0.0/16,fd00:10:42::/56", "--service-cidr=10.43.0.0/16,fd00:10:43::/112")
				n, err := serverNetworks(f, net.ParseIP("172.18.0.2"))
				if err != nil {
					t.Fatal(err)
				}
				if got := joinIPNets(n.clusterCIDRs); got != "10.42.0.0/16,fd00:10:42::/56" {
					t.Errorf("cluster CIDRs %s", got)
				}
				// kube-controller-manager allocates node CIDRs from every
				// cluster CIDR (k3s-io/k3s pkg/daemons/control/server.go@v1.35.5+k3s1
				// controllerManager: util.JoinIPNets(cfg.ClusterIPRanges)).
				kcm := controllerManagerArgs(f, "kc", &apiserver.Server{}, joinIPNets(n.clusterCIDRs), joinIPNets(n.serviceCIDRs))
				if got := argValues(kcm, "cluster-cidr"); !reflect.DeepEqual(got, []string{"10.42.0.0/16,fd00:10:42::/56"}) {
					t.Errorf("kube-controller-manager --cluster-cidr %q", got)
				}
				if got := argValues(kcm, "service-cluster-ip-range"); !reflect.DeepEqual(got, []string{"10.43.0.0/16,fd00:10:43::/112"}) {
					t.Errorf("kube-controller-manager --service-cluster-ip-range %q", got)
				}
				if _, err := parseFlags("server", []string{"--cluster-cidr=10.42.0.0/16,nonsense"}); err == nil {
					t.Error("a bad cluster-cidr item was accepted")
				}
				n6, _ := serverNetworks(mustFlags(t, "server"), net.ParseIP("fd00::2"))
				if joinIPNets(n6.clusterCIDRs) != "fd00:42::/56" || joinIPNets(n6.serviceCIDRs) != "fd00:43::/112" {
					t.Errorf("IPv6 defaults %s %s", joinIPNets(n6.clusterCIDRs), joinIPNets(n6.serviceCIDRs))
				}
			},
		},
		{
			input: "--service-cidr CIDR[,CIDR] (product, ipv6 and dual lanes)",
			src:   "k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1 (GetIndexedIP(svcCIDR, 10))",
			k3s:   "every item parsed; cluster DNS is the 10th address of every service CIDR unless --cluster-dns; kubelet gets them all",
			check: func(t *testing.T) {
				n, err := serverNetworks(mustFlags(t, "server", "--service-cidr=10.43.0.0/16,fd00:10:43::/112"), net.ParseIP("172.18.0.2"))
				if err != nil {
					t.Fatal(err)
				}
				if got := joinIPs(n.clusterDNS); got != "10.43.0.10,fd00:10:43::a" {
					t.Errorf("cluster DNS %s", got)
				}
				cfg := parseKubeletConfig(t, kubeletConfig(nodeOptions{clusterDNS: []string{"10.43.0.10", "fd00:10:43::a"}}, "/etc/resolv.conf"))
				if !slices.Equal(cfg.ClusterDNS, []string{"10.43.0.10", "fd00:10:43::a"}) {
					t.Errorf("kubelet config's clusterDNS %v, want both addresses", cfg.ClusterDNS)
				}
			},
		},
		{
			input: "node addresses without --node-ip (every node)",
			src:   "k3s-io/k3s pkg/util/net.go@v1.35.5+k3s1 GetHostnameAndIPs; k8s.io/apimachinery pkg/util/net/interface.go@v0.36.3 ChooseHostInterface, ResolveBindAddress",
			k3s:   "the default route's interface address, IPv4 first; when IPv4, also the IPv6 address an IPv6-first lookup finds, if different: a node with IPv4 and IPv6 default routes gets both",
			check: func(t *testing.T) {
				for _, tc := range []struct{ primary, v6, want string }{
					{"172.18.0.3", "fd00::3", "172.18.0.3,fd00::3"},
					{"172.18.0.3", "", "172.18.0.3"},
					{"172.18.0.3", "172.18.0.3", "172.18.0.3"},
					{"fd00::3", "fd00::4", "fd00::3"},
				} {
					ips, err := nodeIPs(nil, detector(tc.primary, tc.v6))
					if err != nil || joinIPs(ips) != tc.want {
						t.Errorf("detected %s/%s: %s %v, want %s", tc.primary, tc.v6, joinIPs(ips), err, tc.want)
					}
				}
			},
		},
		{
			input: "--node-ip IP[,IP]",
			src:   "k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1 (node-ip,i: a string slice); pkg/util/net.go@v1.35.5+k3s1 GetHostnameAndIPs, ParseStringSliceToIPs; pkg/cli/server/server.go@v1.35.5+k3s1",
			k3s:   "the node's addresses, in order; a bad one stops k3s; on a server the first is kube-apiserver's --advertise-address",
			check: func(t *testing.T) {
				f := mustFlags(t, "server", "--node-ip=fd00::2,172.18.0.2")
				if g := mustFlags(t, "agent", "-i", "172.18.0.2", "--node-ip", "fd00::2"); !reflect.DeepEqual(g.nodeIPs, []string{"172.18.0.2", "fd00::2"}) {
					t.Errorf("repeated --node-ip/-i %q", g.nodeIPs)
				}
				ips, err := nodeIPs(f.nodeIPs, detector("10.0.0.1", ""))
				if err != nil || joinIPs(ips) != "fd00::2,172.18.0.2" {
					t.Errorf("node IPs %s %v", joinIPs(ips), err)
				}
				if _, err := nodeIPs([]string{"172.18.0.2,bogus"}, detector("10.0.0.1", "")); err == nil {
					t.Error("a bad node-ip was accepted")
				}
				_, _, defs := apiserverListen(cidrsOf(t, "fd00:10:43::/112"), f.nodeIPs)
				if defs["advertise-address"] != "fd00::2" {
					t.Errorf("advertise-address %q", defs["advertise-address"])
				}
				if _, _, defs := apiserverListen(cidrsOf(t, "10.43.0.0/16"), nil); len(defs) != 0 {
					t.Errorf("without --node-ip k3s sets no advertise-address, got %v", defs)
				}
			},
		},
		{
			input: "node addresses against --cluster-cidr and --service-cidr (every node)",
			src:   "k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1 (address order); pkg/agent/run.go@v1.35.5+k3s1 run",
			k3s:   "the address of the primary cluster CIDR's family goes first; cluster and service CIDRs of different families, or node addresses lacking a cluster family, stop the agent",
			check: func(t *testing.T) {
				v6, dual, v4 := cidrsOf(t, "fd00:10:42::/56"), cidrsOf(t, "10.42.0.0/16,fd00:10:42::/56"), cidrsOf(t, "10.42.0.0/16")
				sv6, sdual, sv4 := cidrsOf(t, "fd00:10:43::/112"), cidrsOf(t, "10.43.0.0/16,fd00:10:43::/112"), cidrsOf(t, "10.43.0.0/16")
				both := ipsOf("172.18.0.3", "fd00::3")
				if got := joinIPs(clusterFamilyFirst(both, v6)); got != "fd00::3,172.18.0.3" {
					t.Errorf("IPv6 cluster order %s", got)
				}
				if got := joinIPs(clusterFamilyFirst(both, dual)); got != "172.18.0.3,fd00::3" {
					t.Errorf("dual cluster order %s", got)
				}
				for _, ok := range []struct {
					c, s []*net.IPNet
					ips  []net.IP
				}{{v4, sv4, ipsOf("172.18.0.3")}, {v6, sv6, ipsOf("fd00::3", "172.18.0.3")}, {v6, sv6, ipsOf("fd00::3")}, {dual, sdual, both}, {v4, sv4, both}} {
					if err := validateFamilies(ok.c, ok.s, ok.ips); err != nil {
						t.Errorf("%v/%v with %v refused: %v", ok.c, ok.s, ok.ips, err)
					}
				}
				for _, bad := range []struct {
					c, s []*net.IPNet
					ips  []net.IP
					msg  string
				}{
					{v6, sv6, ipsOf("172.18.0.3"), "and node-ip"},
					{dual, sdual, ipsOf("172.18.0.3"), "and node-ip"},
					{v4, sv4, ipsOf("fd00::3"), "and node-ip"},
					{v6, sv4, ipsOf("fd00::3"), "and service-cidr"},
					{dual, sv4, both, "and service-cidr"},
				} {
					err := validateFamilies(bad.c, bad.s, bad.ips)
					if err == nil || !strings.Contains(err.Error(), bad.msg) || !strings.Contains(err.Error(), "must share the same IP version") {
						t.Errorf("%v/%v with %v: %v, want k3s's %q refusal", bad.c, bad.s, bad.ips, err, bad.msg)
					}
				}
			},
		},
		{
			input: "listen and health addresses (no flag)",
			src:   "k3s-io/k3s pkg/daemons/agent/agent.go@v1.35.5+k3s1 defaultKubeletConfig; pkg/util/net.go@v1.35.5+k3s1 GetDefaultAddresses",
			k3s:   "kubelet listens on 0.0.0.0, or :: when the first node address is IPv6, with health on 127.0.0.1 or ::1",
			check: func(t *testing.T) {
				// Parsed as kubelet parses it: an unquoted "::" is no YAML
				// kubelet can load (it exited so on an ipv6 rig lane).
				cfg := parseKubeletConfig(t, kubeletConfig(nodeOptions{ips: ipsOf("fd00::3", "172.18.0.3")}, "/etc/resolv.conf"))
				if cfg.Address != "::" || cfg.HealthzBindAddress != "::1" {
					t.Errorf("IPv6-first kubelet config: address %q, healthzBindAddress %q", cfg.Address, cfg.HealthzBindAddress)
				}
				cfg = parseKubeletConfig(t, kubeletConfig(nodeOptions{ips: ipsOf("172.18.0.3", "fd00::3")}, "/etc/resolv.conf"))
				if cfg.Address != "0.0.0.0" || cfg.HealthzBindAddress != "127.0.0.1" {
					t.Errorf("IPv4-first kubelet config: address %q, healthzBindAddress %q", cfg.Address, cfg.HealthzBindAddress)
				}
			},
		},
		{
			input: "kube-apiserver's listen address (no flag)",
			src:   "k3s-io/k3s pkg/daemons/control/server.go@v1.35.5+k3s1 apiServer (bind-address is Loopback(false) unless set), pkg/daemons/config/types.go@v1.35.5+k3s1 Control.Loopback (read at 6a4781ad)",
			k3s:   "kube-apiserver binds k3s's loopback (::1 when the primary, first, service CIDR is IPv6) behind k3s's supervisor on 6443",
			standin: "kube-apiserver listens on 6443 itself on 0.0.0.0 or ::, the loopback's family: the stand-in has no supervisor; " +
				"kube-apiserver resolves the same advertised address from either bind",
			check: func(t *testing.T) {
				if bind, lo, _ := apiserverListen(cidrsOf(t, "fd00:10:43::/112"), nil); bind != "::" || lo.String() != "::1" {
					t.Errorf("IPv6 service range: bind %s loopback %s", bind, lo)
				}
				if bind, lo, _ := apiserverListen(cidrsOf(t, "10.43.0.0/16,fd00:10:43::/112"), nil); bind != "0.0.0.0" || lo.String() != "127.0.0.1" {
					t.Errorf("dual service range: bind %s loopback %s", bind, lo)
				}
				if bind, lo, _ := apiserverListen(cidrsOf(t, "fd00:10:43::/112,10.43.0.0/16"), nil); bind != "::" || lo.String() != "::1" {
					t.Errorf("dual service range, IPv6 first: bind %s loopback %s", bind, lo)
				}
			},
		},
		{
			input: "--disable=traefik, --disable=servicelb, --disable=metrics-server (product, server)",
			src:   "k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1 (Skips/Disables)",
			k3s:   "the named packaged components are not deployed; k3s does not check the names",
			standin: "the same for the names (a misspelt one is taken and disables nothing); of the components it deploys " +
				"CoreDNS and local-storage, and it refuses to start with traefik, servicelb or metrics-server enabled (packaged.go)",
			check: func(t *testing.T) {
				f := mustFlags(t, "server", "--disable=traefik,servicelb", "--disable=metrics-server", "--disable=treafik")
				if !slices.Equal(f.disable, []string{"traefik", "servicelb", "metrics-server", "treafik"}) {
					t.Errorf("disable %v", f.disable)
				}
				if _, err := newPackaged(mustFlags(t, "server", "--disable=treafik,servicelb,metrics-server")); err == nil || !strings.Contains(err.Error(), "traefik") {
					t.Errorf("a server left with traefik enabled: %v, want a refusal naming traefik", err)
				}
			},
		},
		{
			input:   "--flannel-backend=none (product, server)",
			src:     "k3s-io/k3s pkg/executor/embed/embed.go@v1.35.5+k3s1 (CNI dirs set for embedded flannel only); pkg/agent/templates/templates.go@v1.35.5+k3s1 (no cni section without them); containerd/containerd internal/cri/config/config_unix.go@v2.2.3 (defaults /opt/cni/bin, /etc/cni/net.d)",
			k3s:     "no embedded flannel; containerd's CNI uses the standard directories, where the lane's CNI installs itself",
			standin: "any other backend is refused: the stand-in embeds no flannel",
			check: func(t *testing.T) {
				mustFlags(t, "server", "--flannel-backend", "none")
				if _, err := parseFlags("server", []string{"--flannel-backend=vxlan"}); err == nil {
					t.Error("vxlan accepted")
				}
				cfg := string(containerdConfigTOML("p", false))
				if !strings.Contains(cfg, `bin_dirs = ["/opt/cni/bin"]`) || !strings.Contains(cfg, `conf_dir = "/etc/cni/net.d"`) {
					t.Errorf("containerd CNI dirs:\n%s", cfg)
				}
			},
		},
		{
			input:   "--disable-network-policy (product, server)",
			src:     "k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1 (DisableNPC from the server)",
			k3s:     "no embedded network policy controller",
			standin: "the stand-in never runs one: without the flag k3s would run kube-router's, which the lane never asks for",
			check: func(t *testing.T) {
				if !mustFlags(t, "server", "--disable-network-policy").disableNetworkPolicy {
					t.Error("not parsed")
				}
				if _, err := parseFlags("server", []string{"--disable-network-policy=maybe"}); err == nil {
					t.Error("a bad boolean was accepted")
				}
			},
		},
		{
			input:   "/etc/rancher/k3s/registries.yaml (k3d, from the product's registries config)",
			src:     "k3d-io/k3d pkg/client/cluster.go@v5.9.0 (DefaultRegistriesFilePath); k3s-io/k3s pkg/agent/containerd/config.go@v1.35.5+k3s1 getHostConfigs, normalizeEndpointAddress",
			k3s:     "one certs.d/<registry>/hosts.toml per mirror (\"*\" as _default); endpoints normalised; a path other than /v2 kept with override_path",
			standin: "configs, auths and rewrites are refused, not rendered: the product sets none",
			check: func(t *testing.T) {
				hosts, err := registryHosts([]byte("mirrors:\n  \"*\":\n    endpoint: [\"http://mirror.local:5000/sub/path\"]\n  registry:5000:\n    endpoint: [\"http://registry:5000\"]\n"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(hosts["_default"], "[host.\"http://mirror.local:5000/sub/path\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n") {
					t.Errorf("_default/hosts.toml:\n%s", hosts["_default"])
				}
				if strings.Contains(hosts["registry:5000"], "override_path") || !strings.Contains(hosts["registry:5000"], "[host.\"http://registry:5000/v2\"]") {
					t.Errorf("registry:5000/hosts.toml:\n%s", hosts["registry:5000"])
				}
			},
		},
		{
			input: "/etc/resolv.conf (k3d's DNS fix points it at the network gateway)",
			src:   "k3d-io/k3d pkg/types/fixes/assets/k3d-entrypoint-dns.sh@v5.9.0; k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1 locateOrGenerateResolvConf, isValidNameserver",
			k3s:   "kubelet gets the first of /etc/resolv.conf and /run/systemd/resolve/resolv.conf whose nameservers are all global unicast, else a generated one with 8.8.8.8 and 2001:4860:4860::8888 (169.254.169.254, the instance metadata address, counts as usable); the agent itself resolves with the node's resolv.conf and nothing else",
			check: func(t *testing.T) {
				dir := t.TempDir()
				fixed, unfixed, gen := filepath.Join(dir, "fixed"), filepath.Join(dir, "unfixed"), filepath.Join(dir, "gen", "resolv.conf")
				if err := os.WriteFile(fixed, []byte("search x\nnameserver 172.18.0.1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(unfixed, []byte("nameserver 127.0.0.11\noptions ndots:0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if got, err := kubeletResolvConf([]string{unfixed, fixed}, gen); err != nil || got != fixed {
					t.Errorf("chose %s (%v), want %s", got, err, fixed)
				}
				metadata := filepath.Join(dir, "metadata")
				if err := os.WriteFile(metadata, []byte("nameserver 169.254.169.254\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if got, err := kubeletResolvConf([]string{unfixed, metadata}, gen); err != nil || got != metadata {
					t.Errorf("chose %s (%v), want %s: the instance metadata address is a usable nameserver", got, err, metadata)
				}
				got, err := kubeletResolvConf([]string{unfixed, filepath.Join(dir, "missing")}, gen)
				if b, _ := os.ReadFile(gen); err != nil || got != gen || string(b) != "nameserver 8.8.8.8\nnameserver 2001:4860:4860::8888\n" {
					t.Errorf("chose %s (%v) holding %q, want the generated file of 8.8.8.8 and 2001:4860:4860::8888", got, err, b)
				}
			},
		},
		{
			input:   "kubectl / k3s kubectl ARGS (k3d's entrypoint: kubectl uncordon/drain on servers)",
			src:     "k3d-io/k3d pkg/types/fixes/assets/k3d-entrypoint.sh@v5.9.0; k3s-io/k3s pkg/kubectl/main.go, cmd/k3s/main.go (runCLIs, externalCLI, stageAndRun), go.mod@v1.35.5+k3s1 (read at 6a4781ad)",
			k3s:     "a whole kubectl: the data dir is extracted and its bin/kubectl (the multi-call binary) run, which defaults KUBECONFIG to /etc/rancher/k3s/k3s.yaml, else ~/.kube/k3s.yaml, when neither KUBECONFIG nor --kubeconfig is given and the file exists, then runs NewDefaultKubectlCommand of its fork's k8s.io/kubectl v1.35.5-k3s1",
			standin: "the same data dir ($K3S_DATA_DIR, --data-dir/-d, /var/lib/rancher/k3s for root, else ~/.rancher/k3s; not the config file's data-dir: the product writes no k3s config on the host) with what extract leaves there (data/<asset>/bin/k3s, data/current, data/.lock, data/cni; none when the asset is there or in the root default already), so a kubectl run that would write /var/lib/rancher/k3s on a real host writes it on the rig (test/e2e TestKubevirtciDropIn checks the lane's .kubectl writes its own dir); the same KUBECONFIG default and a whole kubectl, run in process from there (the binary copied to the host as the lane's kubectl is whole too: test/e2e TestKubevirtciDropIn applies through it), and k8s.io/kubectl v0.37.2 (Kubernetes' staging kubectl at the product module's client-go version, one apimachinery per module): within kubectl's one-minor skew of the rig's kube-apiserver v1.36.3 (kubernetes/website content/en/releases/version-skew-policy.md@release-1.35)",
			check: func(t *testing.T) {
				dir := t.TempDir()
				global := filepath.Join(dir, "k3s.yaml")
				if err := os.WriteFile(global, []byte("kc"), 0o600); err != nil {
					t.Fatal(err)
				}
				kc := func(env []string) string {
					for _, e := range env {
						if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
							return v
						}
					}
					return ""
				}
				if env, _ := kubectlEnv([]string{"HOME=" + dir}, []string{"kubectl", "get", "nodes"}, global); kc(env) != global {
					t.Errorf("KUBECONFIG %q, want %s", kc(env), global)
				}
				if env, _ := kubectlEnv([]string{"KUBECONFIG=/x"}, []string{"kubectl"}, global); kc(env) != "/x" {
					t.Errorf("KUBECONFIG %q, want the caller's", kc(env))
				}
				if env, _ := kubectlEnv(nil, []string{"kubectl", "--kubeconfig", "/y"}, global); kc(env) != "" {
					t.Errorf("KUBECONFIG %q set although --kubeconfig was given", kc(env))
				}
				home := filepath.Join(dir, "home")
				if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, ".kube", "k3s.yaml"), []byte("kc"), 0o600); err != nil {
					t.Fatal(err)
				}
				if env, _ := kubectlEnv([]string{"HOME=" + home}, []string{"kubectl"}, filepath.Join(dir, "absent")); kc(env) != filepath.Join(home, ".kube", "k3s.yaml") {
					t.Errorf("KUBECONFIG %q, want the home config", kc(env))
				}
				if env, _ := kubectlEnv([]string{"HOME=" + dir}, []string{"kubectl"}, filepath.Join(dir, "absent")); kc(env) != "" {
					t.Errorf("KUBECONFIG %q with no config anywhere", kc(env))
				}

				// The data dir: the environment over an argument over the default.
				for _, c := range []struct {
					env, argv []string
					root      bool
					want      string
				}{
					{[]string{"K3S_DATA_DIR=/e", "HOME=/h"}, []string{"kubectl", "--data-dir", "/a"}, true, "/e"},
					{[]string{"HOME=/h"}, []string{"kubectl", "get", "-d", "/a"}, true, "/a"},
					{[]string{"HOME=/h"}, []string{"kubectl", "get", "--data-dir=/a", "--unknown"}, false, "/a"},
					{[]string{"HOME=/h"}, []string{"kubectl", "get", "nodes"}, true, defaultDataDir},
					{[]string{"HOME=/h"}, []string{"kubectl", "get", "nodes"}, false, "/h/.rancher/k3s"},
				} {
					if got := kubectlDataDir(c.env, c.argv, c.root); got != c.want {
						t.Errorf("data dir of %v %v (root %v): %s, want %s", c.env, c.argv, c.root, got, c.want)
					}
				}
				lane, def := filepath.Join(dir, "lane-data"), filepath.Join(dir, "default-data")
				got, err := stageDataDir(lane, def)
				if err != nil || got != filepath.Join(lane, "data", standinAsset) {
					t.Fatalf("staged %s, %v; want the asset dir in %s", got, err, lane)
				}
				for _, f := range []string{"data/.lock", "data/cni", "data/" + standinAsset + "/bin/k3s"} {
					if _, err := os.Stat(filepath.Join(lane, f)); err != nil {
						t.Errorf("after extracting: %v", err)
					}
				}
				if target, err := os.Readlink(filepath.Join(lane, "data", "current")); err != nil || target != got {
					t.Errorf("data/current -> %q (%v), want %s", target, err, got)
				}
				if _, err := os.Stat(def); !os.IsNotExist(err) {
					t.Errorf("the default data dir was touched: %v", err)
				}
				// An asset in the root default serves every other data dir.
				if _, err := stageDataDir(def, def); err != nil {
					t.Fatal(err)
				}
				other := filepath.Join(dir, "other-data")
				if got, err := stageDataDir(other, def); err != nil || got != filepath.Join(def, "data", standinAsset) {
					t.Errorf("with the default extracted: %s, %v; want the default's asset dir", got, err)
				}
				if _, err := os.Stat(other); !os.IsNotExist(err) {
					t.Errorf("extracted into %s although the default holds the asset: %v", other, err)
				}
			},
		},
	})
}

// The stand-in's sandbox image is the one the product lists for k3s
// (pkg/provider K3sPauseImage, what plan shows and load --plan-images
// loads): one name for one fact, checked here rather than shared, so the
// stand-in binary does not link the product's provider package.
func TestSandboxImageIsTheProductsK3sPauseImage(t *testing.T) {
	if defaultPauseImage != provider.K3sPauseImage {
		t.Errorf("stand-in sandbox image %s, the product lists %s", defaultPauseImage, provider.K3sPauseImage)
	}
}

// parseKubeletConfig reads the stand-in's kubelet config file strictly, the
// fields the rows check.
func parseKubeletConfig(t *testing.T, cfg string) (out struct {
	Address            string   `json:"address"`
	HealthzBindAddress string   `json:"healthzBindAddress"`
	ClusterDNS         []string `json:"clusterDNS"`
}) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(cfg), &out); err != nil {
		t.Fatalf("kubelet config is no YAML kubelet can load: %v\n%s", err, cfg)
	}
	return out
}
