package e2e

import (
	"context"
	"net"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// An ipv6 lane comes up, its pods get IPv6 addresses from the lane's pod
// network, a VF reaches a pod, and down returns every PF. It needs what
// only a real node shows: IPv6 enabled in each node's netns before k3s
// starts (kube-proxy exits on an IPv6-primary node without it), k3s's node
// addresses and family checks, and kubelet, kube-proxy and Flannel on IPv6.
// One agent: the families are the point.
func TestIPv6LaneUpVerifyDown(t *testing.T) {
	t.Parallel() // own rig, lane name and API port (see TestMain)
	requireRig(t)
	_, r, l := rigLane(t, 1, func(c *config.Lane) {
		c.Agents = 1
		c.IPFamily = config.IPFamilyIPv6
	})
	l.up(t)

	kc, err := kube.Connect(l.cfg.Dir().Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	_, pods, err := net.ParseCIDR(l.cfg.Networks().Pods())
	if err != nil {
		t.Fatal(err)
	}
	list, err := kc.Typed.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("CoreDNS pods: %v (%d)", err, len(list.Items))
	}
	for _, p := range list.Items {
		for _, ip := range p.Status.PodIPs {
			if a := net.ParseIP(ip.IP); a == nil || a.To4() != nil || !pods.Contains(a) {
				t.Errorf("pod %s has %s, want only IPv6 addresses in %s", p.Name, ip.IP, pods)
			}
		}
	}
	if res := run(t, nil, "verify", "--config", l.path); res.code != 0 {
		t.Errorf("verify on an ipv6 lane: exit %d", res.code)
	}
	if res := l.down(t); res.code != 0 {
		t.Fatalf("down: exit %d\n%s", res.code, res.output)
	}
	assertLaneGone(t, r, l, r.State.PFs)
}
