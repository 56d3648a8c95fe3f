package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Dual-stack flannel lane, topology manager restricted/pod, datastore on disk.
func TestClusterConfigGoldenDualTopology(t *testing.T) {
	l := config.Default()
	l.Name = "dual"
	l.IPFamily = config.IPFamilyDual
	l.Kubelet.TopologyManagerPolicy = config.TopologyPolicyRestricted
	l.Kubelet.TopologyManagerScope = config.TopologyScopePod
	l.Server.DatastoreOnTmpfs = new(bool)
	goldenClusterConfig(t, l, allHost(), "dual-topology.golden")
}

// IPv6-only calico lane, topology manager off.
func TestClusterConfigGoldenIPv6Calico(t *testing.T) {
	l := config.Default()
	l.Name = "v6"
	l.CNI = config.CNICalico
	l.IPFamily = config.IPFamilyIPv6
	l.Kubelet.TopologyManagerPolicy = config.TopologyPolicyNone
	goldenClusterConfig(t, l, allHost(), "ipv6-calico.golden")
}

func TestCIDRs(t *testing.T) {
	for _, tc := range []struct{ cni, family, cluster, service string }{
		{config.CNIFlannel, config.IPFamilyIPv4, "10.42.0.0/16", ""},
		{config.CNICalico, config.IPFamilyIPv4, "192.168.0.0/16", ""},
		{config.CNIFlannel, config.IPFamilyDual, "10.42.0.0/16,fd00:10:42::/56", "10.43.0.0/16,fd00:10:43::/112"},
		{config.CNICalico, config.IPFamilyDual, "192.168.0.0/16,fd00:10:42::/56", "10.43.0.0/16,fd00:10:43::/112"},
		{config.CNIFlannel, config.IPFamilyIPv6, "fd00:10:42::/56", "fd00:10:43::/112"},
	} {
		l := config.Default()
		l.CNI, l.IPFamily = tc.cni, tc.family
		c, s := CIDRs(l)
		if c != tc.cluster || s != tc.service {
			t.Errorf("%s/%s: %q %q, want %q %q", tc.cni, tc.family, c, s, tc.cluster, tc.service)
		}
	}
}

// What each node container gets, after k3d's own transform: the topology
// flags on agents only, the CIDRs on the server, the datastore volume on the
// server only.
func TestClusterConfigTopologyCIDRsDatastoreThroughK3d(t *testing.T) {
	for _, tmpfs := range []bool{true, false} {
		l := config.Default()
		l.Name = "pv12"
		l.IPFamily = config.IPFamilyDual
		l.Kubelet.TopologyManagerScope = config.TopologyScopePod
		l.Server.DatastoreOnTmpfs = &tmpfs
		sc, err := ClusterConfig(l, allHost())
		if err != nil {
			t.Fatal(err)
		}
		cc, err := k3dconfig.TransformSimpleToClusterConfig(context.Background(), runtimes.Docker, *sc, "")
		if err != nil {
			t.Fatalf("k3d rejected the translation: %v", err)
		}
		ds := DatastoreVolumeName("pv12") + ":" + ServerDatastoreDir
		for _, n := range cc.Nodes {
			topo := []string{"--kubelet-arg=topology-manager-policy=single-numa-node", "--kubelet-arg=topology-manager-scope=pod"}
			cidrs := []string{"--cluster-cidr=10.42.0.0/16,fd00:10:42::/56", "--service-cidr=10.43.0.0/16,fd00:10:43::/112"}
			isServer := n.Role == k3d.ServerRole
			for _, a := range topo {
				if slices.Contains(n.Args, a) == isServer {
					t.Errorf("%s (%s): %s present=%v; args %v", n.Name, n.Role, a, !isServer, n.Args)
				}
			}
			for _, a := range cidrs {
				if slices.Contains(n.Args, a) != isServer {
					t.Errorf("%s (%s): %s present=%v; args %v", n.Name, n.Role, a, !isServer, n.Args)
				}
			}
			if got := slices.Contains(n.Volumes, ds); got != (isServer && tmpfs) {
				t.Errorf("%s (%s), datastoreOnTmpfs=%v: datastore volume mounted=%v; volumes %v", n.Name, n.Role, tmpfs, got, n.Volumes)
			}
		}
	}
}

func TestIPv6Subnet(t *testing.T) {
	a, b := ipv6Subnet("a"), ipv6Subnet("b")
	if a == b || !strings.HasPrefix(a, "fd") || !strings.HasSuffix(a, "::/64") {
		t.Errorf("subnets %q %q", a, b)
	}
	if HostIPv6("/nonexistent") == "" {
		t.Error("a host without /proc/sys/net/ipv6 reported IPv6")
	}
}
