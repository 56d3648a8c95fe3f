package main

import (
	"context"
	"net"
	"testing"

	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// What the product hands every node of an ipv4, ipv6 and dual lane (after
// k3d's transform) passes k3s's address-family checks on the addresses a
// node of the lane's network has. For ipv6 and dual lanes up creates that
// network with an IPv6 subnet (pkg/provider createIPv6Network), and Docker's
// bridge driver gives every container on it an IPv6 default route beside
// the IPv4 one (moby/moby libnetwork/drivers/bridge/bridge_linux.go Join:
// SetGateway and SetGatewayIPv6 on a network that is not internal; read at
// commit d570d0e767f2 in the search tool's stored copy),
// so k3s detects both addresses without --node-ip. Without the IPv6
// network the ipv6 and dual lanes would be refused, as k3s refuses them:
// that is why up makes it.
func TestProductLanesPassK3sFamilyChecks(t *testing.T) {
	withV6 := detector("172.18.0.3", "fd12:3456:789a:1::3")
	v4only := detector("172.18.0.3", "")
	for _, tc := range []struct {
		family     string
		firstAfter string // the node address k3s puts first
	}{
		{config.IPFamilyIPv4, "172.18.0.3"},
		{config.IPFamilyDual, "172.18.0.3"},
		{config.IPFamilyIPv6, "fd12:3456:789a:1::3"},
	} {
		l := config.Default()
		l.Name = "fam"
		l.IPFamily = tc.family
		sc, err := provider.ClusterConfig(l, provider.HostFacts{VFIODir: true, LibModules: true})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := k3dconfig.TransformSimpleToClusterConfig(context.Background(), runtimes.Docker, *sc, "")
		if err != nil {
			t.Fatalf("%s: k3d rejected the translation: %v", tc.family, err)
		}
		var server k3sFlags
		var agents []k3sFlags
		for _, n := range cc.Nodes {
			role := "agent"
			if n.Role == k3d.ServerRole {
				role = "server"
			}
			f, err := parseFlags(role, n.Args)
			if err != nil {
				t.Fatalf("%s: %s args %q: %v", tc.family, n.Name, n.Args, err)
			}
			if role == "server" {
				server = f
			} else {
				agents = append(agents, f)
			}
		}
		check := func(host hostDetector) error {
			for _, f := range append([]k3sFlags{server}, agents...) {
				ips, err := nodeIPs(f.nodeIPs, host)
				if err != nil {
					return err
				}
				nets, err := serverNetworks(server, ips[0])
				if err != nil {
					return err
				}
				if ips, err = agentAddresses(ips, nets.clusterCIDRs, nets.serviceCIDRs); err != nil {
					return err
				}
				if !ips[0].Equal(net.ParseIP(tc.firstAfter)) {
					t.Errorf("%s: first node address %s, want %s", tc.family, ips[0], tc.firstAfter)
				}
			}
			return nil
		}
		if err := check(withV6); err != nil {
			t.Errorf("%s lane on an IPv6-enabled network: k3s would refuse it: %v", tc.family, err)
		}
		if err := check(v4only); (err != nil) != (tc.family != config.IPFamilyIPv4) {
			t.Errorf("%s lane on an IPv4-only network: refused=%v (%v); k3s refuses only ipv6 and dual there", tc.family, err != nil, err)
		}
	}
}
