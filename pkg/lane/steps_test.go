package lane

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

func TestCNIOptionsFromLane(t *testing.T) {
	l := config.Default()
	l.NodeLabel = "example.com/sriov=yes"
	l.VFDriver = config.VFDriverNetdevice
	l.ImageRegistryMirror = "mirror.local:5000"
	o := CNIOptions(l, []string{"ens1f0", "ens2f0"})
	if o.NodeSelectorKey != "example.com/sriov" || o.NodeSelectorValue != "yes" || o.VFDriver != "netdevice" ||
		o.ImageRegistryMirror != "mirror.local:5000" || o.Resource() != "kubevirt.io/sriov_net" || len(o.PFNames) != 2 {
		t.Fatalf("%+v", o)
	}
}

func TestPreflightErrorPointsAtCheck(t *testing.T) {
	err := &PreflightError{Failed: []CheckResult{{Name: "pfs", Status: Fail, Message: "no SR-IOV PF", Hint: "get one"}}}
	if !strings.Contains(err.Error(), "sriov-lane check") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatal(err)
	}
}

// What up says to do about an image the nodes cannot pull names the
// setting that fixes it and a load command for this very lane.
func TestPullHint(t *testing.T) {
	l := config.Default()
	l.Name = "lane2"
	got := pullHint(l)
	for _, want := range []string{"imageRegistryMirror (--image-registry-mirror)", "'sriov-lane plan'", "'sriov-lane load --name lane2 IMAGE...'"} {
		if !strings.Contains(got, want) {
			t.Errorf("without a mirror, lacks %q: %s", want, got)
		}
	}
	l.ImageRegistryMirror = "http://mirror.local:5000"
	l.StateDir = "/srv/lanes"
	got = pullHint(l)
	for _, want := range []string{"through imageRegistryMirror http://mirror.local:5000", "'sriov-lane plan'", "'sriov-lane load --name lane2 --state-dir /srv/lanes IMAGE...'"} {
		if !strings.Contains(got, want) {
			t.Errorf("with a mirror, lacks %q: %s", want, got)
		}
	}
}

// The worker role reaches the agents through the API (kubelet would refuse
// it as a flag), beside the lane's own label; the server gets neither and
// labels the Node already had stay.
func TestStepLabelNodesSetsLaneLabelAndWorkerRoleOnAgents(t *testing.T) {
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	cs := fake.NewClientset(
		node("k3d-l-server-0", map[string]string{"node-role.kubernetes.io/control-plane": "true"}),
		node("k3d-l-agent-0", map[string]string{"kubernetes.io/hostname": "k3d-l-agent-0"}),
		node("k3d-l-agent-1", nil),
	)
	l := config.Default()
	l.NodeLabel = "example.com/sriov=yes"
	c := &Session{Lane: l, Kube: &kube.Clients{Typed: cs},
		Agents: []provider.Node{{Name: "k3d-l-agent-0"}, {Name: "k3d-l-agent-1"}}}
	if err := stepLabelNodes(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"k3d-l-agent-0", "k3d-l-agent-1"} {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["example.com/sriov"] != "yes" || n.Labels["node-role.kubernetes.io/worker"] != "worker" {
			t.Errorf("%s labels %v", name, n.Labels)
		}
	}
	a0, _ := cs.CoreV1().Nodes().Get(context.Background(), "k3d-l-agent-0", metav1.GetOptions{})
	if a0.Labels["kubernetes.io/hostname"] != "k3d-l-agent-0" {
		t.Errorf("existing label lost: %v", a0.Labels)
	}
	srv, _ := cs.CoreV1().Nodes().Get(context.Background(), "k3d-l-server-0", metav1.GetOptions{})
	if _, ok := srv.Labels["node-role.kubernetes.io/worker"]; ok {
		t.Errorf("server labelled worker: %v", srv.Labels)
	}

	c.Agents = append(c.Agents, provider.Node{Name: "k3d-l-agent-9"})
	if err := stepLabelNodes(context.Background(), c); err == nil {
		t.Error("labelling a Node that does not exist succeeded")
	}
}

// up waits for the Deployments of every packaged component the lane keeps.
func TestK3sWorkloadsAreTheKeptDeployments(t *testing.T) {
	var got []string
	for _, u := range k3sWorkloads() {
		if u.GetKind() != "Deployment" || u.GroupVersionKind().Group != "apps" || u.GetNamespace() != "kube-system" {
			t.Errorf("%s %s/%s: not a kube-system Deployment", u.GetKind(), u.GetNamespace(), u.GetName())
		}
		got = append(got, u.GetName())
	}
	for _, c := range provider.K3sKept {
		if !slices.Contains(got, c.Deployment) {
			t.Errorf("no wait for %s's Deployment %s", c.Name, c.Deployment)
		}
	}
	if !slices.Contains(got, "coredns") || !slices.Contains(got, "local-path-provisioner") {
		t.Errorf("waits for %v", got)
	}
}
