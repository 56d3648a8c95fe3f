package main

import (
	"fmt"
	"net"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilsnet "k8s.io/utils/net"
)

// How a k3s node picks its addresses and checks them against the cluster's
// networks. The facts are k3s's; the address detection itself is the one
// k3s calls, apimachinery's ChooseHostInterface and ResolveBindAddress.

// splitList splits a k3s string-slice flag's values at commas and nothing
// more: no trimming, no blank dropped (k3s-io/k3s
// pkg/util/client.go@v1.35.5+k3s1 SplitStringSlice, as applied to
// --tls-san, --cluster-cidr, --service-cidr, --cluster-dns and --disable),
// so "a, b" or "a," is refused where k3s parses each item ("invalid
// cluster-cidr  b").
func splitList(values ...string) []string {
	var out []string
	for _, v := range values {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// parseCIDRs parses a --cluster-cidr or --service-cidr, refusing what
// k3s's server refuses at start ("invalid cluster-cidr %s",
// k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1).
func parseCIDRs(flag string, values []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, v := range splitList(values...) {
		_, n, err := net.ParseCIDR(v)
		if err != nil {
			return nil, fmt.Errorf("invalid %s %s: %w", flag, v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinIPNets(ns []*net.IPNet) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.String())
	}
	return strings.Join(s, ",")
}

func joinIPs(ips []net.IP) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ",")
}

// hostDetector finds the node's addresses when --node-ip is not given:
// primary is ChooseHostInterface (the default route's interface, IPv4
// first), ipv6 ResolveBindAddress(::1) (the same with IPv6 first).
type hostDetector struct {
	primary func() (net.IP, error)
	ipv6    func() (net.IP, error)
}

var systemHost = hostDetector{
	primary: utilnet.ChooseHostInterface,
	ipv6:    func() (net.IP, error) { return utilnet.ResolveBindAddress(net.IPv6loopback) },
}

// nodeIPs are the node's addresses as k3s's GetHostnameAndIPs picks them
// (k3s-io/k3s pkg/util/net.go@v1.35.5+k3s1): the --node-ip values (each a comma
// list) when given, else the host interface's address and, when that is
// IPv4, the IPv6 address an IPv6-first lookup finds if it differs. A node on
// a network with IPv4 and IPv6 default routes thus gets both, IPv4 first.
func nodeIPs(flagIPs []string, host hostDetector) ([]net.IP, error) {
	if len(flagIPs) > 0 {
		var ips []net.IP
		for _, s := range flagIPs {
			for _, v := range strings.Split(s, ",") {
				ip := net.ParseIP(v)
				if ip == nil {
					return nil, fmt.Errorf("invalid node-ip: invalid ip format '%s'", v)
				}
				ips = append(ips, ip)
			}
		}
		return ips, nil
	}
	ip, err := host.primary()
	if err != nil {
		return nil, err
	}
	ips := []net.IP{ip}
	if ip.To4() != nil {
		if v6, err := host.ipv6(); err == nil && !v6.Equal(ip) {
			ips = append(ips, v6)
		}
	}
	return ips, nil
}

// clusterFamilyFirst puts first the node address of the primary cluster
// CIDR's family, as k3s's agent does before anything uses them
// (k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1: swap nodeIPs[0] and [1]
// when ClusterIPRange's family differs from nodeIPs[0]'s).
func clusterFamilyFirst(ips []net.IP, clusterCIDRs []*net.IPNet) []net.IP {
	out := append([]net.IP(nil), ips...)
	if len(clusterCIDRs) > 0 && len(out) > 1 && utilsnet.IPFamilyOfCIDR(clusterCIDRs[0]) != utilsnet.IPFamilyOf(out[0]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// agentAddresses is what k3s's agent does with the node's addresses
// before it starts anything: the cluster CIDR's family first
// (clusterFamilyFirst), then validateFamilies.
func agentAddresses(ips []net.IP, clusterCIDRs, serviceCIDRs []*net.IPNet) ([]net.IP, error) {
	ips = clusterFamilyFirst(ips, clusterCIDRs)
	if err := validateFamilies(clusterCIDRs, serviceCIDRs, ips); err != nil {
		return nil, err
	}
	return ips, nil
}

// validateFamilies refuses what k3s's agent refuses before it starts
// anything (k3s-io/k3s pkg/agent/run.go@v1.35.5+k3s1 run): cluster and
// service CIDRs of different IP families, or node addresses lacking a
// family of the cluster CIDR. The primary CIDRs are the first of each
// list, as the server hands them to its agents.
func validateFamilies(clusterCIDRs, serviceCIDRs []*net.IPNet, ips []net.IP) error {
	if len(clusterCIDRs) == 0 || len(serviceCIDRs) == 0 || len(ips) == 0 {
		return fmt.Errorf("cluster-cidr %v, service-cidr %v and node-ip %v must all be set", clusterCIDRs, serviceCIDRs, ips)
	}
	dualCluster, err := utilsnet.IsDualStackCIDRs(clusterCIDRs)
	if err != nil {
		return fmt.Errorf("failed to validate cluster-cidr: %w", err)
	}
	dualService, err := utilsnet.IsDualStackCIDRs(serviceCIDRs)
	if err != nil {
		return fmt.Errorf("failed to validate service-cidr: %w", err)
	}
	dualNode, err := utilsnet.IsDualStackIPs(ips)
	if err != nil {
		return fmt.Errorf("failed to validate node-ip: %w", err)
	}
	cluster, service, node := clusterCIDRs[0], serviceCIDRs[0], ips[0]
	serviceIPv4, clusterIPv4, nodeIPv4 := utilsnet.IsIPv4CIDR(service), utilsnet.IsIPv4CIDR(cluster), utilsnet.IsIPv4(node)
	serviceIPv6, clusterIPv6, nodeIPv6 := utilsnet.IsIPv6CIDR(service), utilsnet.IsIPv6CIDR(cluster), utilsnet.IsIPv6(node)
	if serviceIPv6 != clusterIPv6 || dualCluster != dualService || serviceIPv4 != clusterIPv4 {
		return fmt.Errorf("cluster-cidr: %v and service-cidr: %v, must share the same IP version (IPv4, IPv6 or dual-stack)", clusterCIDRs, serviceCIDRs)
	}
	if (clusterIPv6 && !nodeIPv6 && !dualNode) || (dualCluster && !dualNode) || (clusterIPv4 && !nodeIPv4 && !dualNode) {
		return fmt.Errorf("cluster-cidr: %v and node-ip: %v, must share the same IP version (IPv4, IPv6 or dual-stack)", clusterCIDRs, ips)
	}
	return nil
}

// defaultCIDRs are k3s's cluster and service CIDRs for a node whose first
// address is ip (k3s-io/k3s pkg/util/net.go@v1.35.5+k3s1 GetDefaultAddresses).
func defaultCIDRs(ip net.IP) (cluster, service string) {
	if utilsnet.IsIPv6(ip) {
		return "fd00:42::/56", "fd00:43::/112"
	}
	return "10.42.0.0/16", "10.43.0.0/16"
}

// clusterDNSIPs are k3s's cluster DNS addresses when --cluster-dns is not
// given: the 10th address of every service CIDR (k3s-io/k3s
// pkg/cli/server/server.go@v1.35.5+k3s1, GetIndexedIP(svcCIDR, 10)).
func clusterDNSIPs(serviceCIDRs []*net.IPNet) ([]net.IP, error) {
	var out []net.IP
	for _, n := range serviceCIDRs {
		ip, err := utilsnet.GetIndexedIP(n, 10)
		if err != nil {
			return nil, fmt.Errorf("cannot configure default cluster-dns address: %w", err)
		}
		out = append(out, ip)
	}
	return out, nil
}

// loopbackFor is k3s's loopback for a cluster: ::1 when the primary (first)
// service CIDR is IPv6, else 127.0.0.1 (k3s-io/k3s
// pkg/daemons/config/types.go@v1.35.5+k3s1 Control.Loopback, which reads
// ServiceIPRange, the first of --service-cidr): a dual-stack cluster with
// IPv6 first gets ::1.
func loopbackFor(serviceCIDRs []*net.IPNet) net.IP {
	if len(serviceCIDRs) > 0 && utilsnet.IsIPv6CIDR(serviceCIDRs[0]) {
		return net.IPv6loopback
	}
	return net.ParseIP("127.0.0.1")
}

// networks are the cluster's pod and service CIDRs and DNS addresses, as a
// k3s server derives them and hands them to its agents.
type networks struct {
	clusterCIDRs, serviceCIDRs []*net.IPNet
	clusterDNS                 []net.IP
}

// serverNetworks derives the networks from the server's flags the way k3s's
// server does (k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1): defaults
// for the family of its first node address when a CIDR flag is absent,
// every item parsed, and --cluster-dns or the 10th address of every
// service CIDR.
func serverNetworks(f k3sFlags, firstNodeIP net.IP) (networks, error) {
	var n networks
	defCluster, defService := defaultCIDRs(firstNodeIP)
	cluster, service := f.clusterCIDRs, f.serviceCIDRs
	if len(cluster) == 0 {
		cluster = []string{defCluster}
	}
	if len(service) == 0 {
		service = []string{defService}
	}
	var err error
	if n.clusterCIDRs, err = parseCIDRs("cluster-cidr", cluster); err != nil {
		return n, err
	}
	if n.serviceCIDRs, err = parseCIDRs("service-cidr", service); err != nil {
		return n, err
	}
	if len(f.clusterDNS) == 0 {
		n.clusterDNS, err = clusterDNSIPs(n.serviceCIDRs)
		return n, err
	}
	for _, s := range splitList(f.clusterDNS...) {
		ip := net.ParseIP(s)
		if ip == nil {
			return n, fmt.Errorf("invalid cluster-dns address %s", s)
		}
		n.clusterDNS = append(n.clusterDNS, ip)
	}
	return n, nil
}

// firstValidIP is the first address among --node-ip values, which k3s's
// server advertises as kube-apiserver's --advertise-address (k3s-io/k3s
// pkg/util/net.go@v1.35.5+k3s1 GetFirstValidIPString;
// pkg/cli/server/server.go@v1.35.5+k3s1). Without --node-ip (or
// --node-external-ip, which the stand-in does not take) k3s sets none.
func firstValidIP(values []string) string {
	for _, s := range splitList(values...) {
		if net.ParseIP(s) != nil {
			return s
		}
	}
	return ""
}
