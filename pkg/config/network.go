package config

import "strings"

// The lane's pod and service networks, the one place they are written:
// pkg/provider gives them to k3s (--cluster-cidr, --service-cidr), pkg/cni
// to the CNI (flannel's net-conf.json, Calico's IP pools), so the two always
// agree.
//
// The IPv6 ones are unique local addresses (fd00::/8): kubevirtci's
// single-stack check expects the pods' primary IPs to start with "fd"
// (kubevirt/kubevirtci cluster-up/up.sh@39bd4947ba4d). The service range is
// a /112, the size k3s's dual-stack example uses; the pod range a /56, so
// each node gets a /64 (kube-controller-manager's default IPv6 node mask)
// and flannel's own minimum is far off (flannel-io/flannel
// pkg/subnet/config.go@v0.28.9).
const (
	// FlannelPodCIDRv4 is k3s's default cluster CIDR (not flannel's own
	// 10.244/16).
	FlannelPodCIDRv4 = "10.42.0.0/16"
	// CalicoPodCIDRv4 is what Calico's operator manifests expect.
	CalicoPodCIDRv4 = "192.168.0.0/16"
	PodCIDRv6       = "fd00:10:42::/56"
	// ServiceCIDRv4 is k3s's default --service-cidr.
	ServiceCIDRv4 = "10.43.0.0/16"
	ServiceCIDRv6 = "fd00:10:43::/112"
)

// Networks are a lane's pod and service CIDRs, each "" for an IP family the
// lane does not use.
type Networks struct {
	PodV4, PodV6         string
	ServiceV4, ServiceV6 string
}

// Networks are the lane's networks, for its CNI and IP family.
func (l *Lane) Networks() Networks { return NetworksOf(l.CNI, l.IPFamily) }

// NetworksOf are the networks of a lane with that CNI and IP family (both
// as Validate accepts them).
func NetworksOf(cni, ipFamily string) Networks {
	podV4 := FlannelPodCIDRv4
	if cni == CNICalico {
		podV4 = CalicoPodCIDRv4
	}
	switch ipFamily {
	case IPFamilyIPv6:
		return Networks{PodV6: PodCIDRv6, ServiceV6: ServiceCIDRv6}
	case IPFamilyDual:
		return Networks{PodV4: podV4, PodV6: PodCIDRv6, ServiceV4: ServiceCIDRv4, ServiceV6: ServiceCIDRv6}
	}
	return Networks{PodV4: podV4, ServiceV4: ServiceCIDRv4}
}

// Pods is the pod CIDRs in k3s's comma-separated form, IPv4 first.
func (n Networks) Pods() string { return joinCIDRs(n.PodV4, n.PodV6) }

// Services is the service CIDRs in k3s's comma-separated form, IPv4 first.
func (n Networks) Services() string { return joinCIDRs(n.ServiceV4, n.ServiceV6) }

func joinCIDRs(v4, v6 string) string {
	var out []string
	for _, c := range []string{v4, v6} {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}
