package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	k3dconfig "github.com/k3d-io/k3d/v5/pkg/config"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// kubeletLabelError is why kubelet would refuse to start with key=value in
// --node-labels, or nil. k3s passes every --node-label to kubelet's
// --node-labels unchanged (k3s-io/k3s pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1
// kubeletArgsAndConfig: node-labels = strings.Join(cfg.NodeLabels, ",")), and
// kubelet's ValidateKubeletFlags (kubernetes/kubernetes
// cmd/kubelet/app/options/options.go@v1.36.3) refuses a key in the
// kubernetes.io or k8s.io namespaces (or a subdomain of them) that
// IsKubeletLabel does not allow, and any key or value that is not a valid
// label. The allowed set is k8s.io/kubelet
// pkg/apis/well_known_labels.go@v0.36.3: the keys below, and the
// kubelet.kubernetes.io and node.kubernetes.io namespaces with their
// subdomains. ValidateKubeletFlags itself lives in k8s.io/kubernetes, which
// the product does not import; the label validation is apimachinery's own.
func kubeletLabelError(key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("label key %q: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fmt.Errorf("label %s value %q: %s", key, value, strings.Join(errs, "; "))
	}
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return nil
	}
	under := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	if !under("kubernetes.io") && !under("k8s.io") {
		return nil
	}
	switch key {
	case "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
		"failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
		"beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
		"kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch":
		return nil
	}
	if under("kubelet.kubernetes.io") || under("node.kubernetes.io") {
		return nil
	}
	return fmt.Errorf("label %s: kubelet refuses kubernetes.io/k8s.io labels outside its own set in --node-labels; set it through the API once the Node exists", key)
}

// kubeletTaintError is why k3s or kubelet would refuse a taint
// "key[=value]:effect": k3s parses --node-taint with kubernetes'
// taints.ParseTaints into kubelet's registerWithTaints and fails the agent
// on an error (k3s-io/k3s pkg/daemons/agent/agent.go@v1.35.5+k3s1 defaultKubeletConfig,
// "failed to parse node taints"); the rules are parseTaint in
// kubernetes/kubernetes pkg/util/taints/taints.go@v1.36.3.
func kubeletTaintError(spec string) error {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok || strings.Contains(effect, ":") {
		return fmt.Errorf("taint %q: want key[=value]:effect", spec)
	}
	switch effect {
	case "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
	}
	parts := strings.Split(kv, "=")
	if len(parts) > 2 {
		return fmt.Errorf("taint %q: more than one =", spec)
	}
	if len(parts) == 2 {
		if errs := validation.IsValidLabelValue(parts[1]); len(errs) > 0 {
			return fmt.Errorf("taint %q: %s", spec, strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsQualifiedName(parts[0]); len(errs) > 0 {
		return fmt.Errorf("taint %q: %s", spec, strings.Join(errs, "; "))
	}
	return nil
}

func TestKubeletRulesRefuseWhatKubeletRefuses(t *testing.T) {
	for _, l := range [][2]string{
		{"node-role.kubernetes.io/worker", "worker"}, {"kubernetes.io/role", "x"}, {"example.k8s.io/a", "b"},
		{"bad key", "x"}, {"sriov_capable", "not valid!"},
	} {
		if kubeletLabelError(l[0], l[1]) == nil {
			t.Errorf("label %s=%s accepted; kubelet refuses it", l[0], l[1])
		}
	}
	for _, l := range [][2]string{
		{"sriov_capable", "true"}, {"node.kubernetes.io/exclude-from-external-load-balancers", "true"},
		{"a.kubelet.kubernetes.io/x", ""}, {"kubernetes.io/hostname", "n"}, {"example.com/x", "y"},
	} {
		if err := kubeletLabelError(l[0], l[1]); err != nil {
			t.Errorf("label %s=%s refused: %v", l[0], l[1], err)
		}
	}
	for _, s := range []string{"a=b:NoSchedule", "a:NoExecute", "example.com/k=v:PreferNoSchedule"} {
		if err := kubeletTaintError(s); err != nil {
			t.Errorf("taint %s refused: %v", s, err)
		}
	}
	for _, s := range []string{"a=b", "a=b:Never", "a=b=c:NoSchedule", "bad key:NoSchedule", "a:b:NoSchedule"} {
		if kubeletTaintError(s) == nil {
			t.Errorf("taint %s accepted", s)
		}
	}
}

// nodeFlagValues returns the values of --name in args, in both forms k3d
// produces (--name=value from ExtraArgs, "--name" "value" from its node
// labels).
func nodeFlagValues(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case strings.HasPrefix(args[i], name+"="):
			out = append(out, strings.TrimPrefix(args[i], name+"="))
		case args[i] == name && i+1 < len(args):
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

// Every label and taint the product hands k3s, on every node of every kind
// of lane, is one kubelet starts with: checked on what k3d gives each node
// container after its own transform.
func TestClusterConfigHandsKubeletOnlyLabelsAndTaintsItAccepts(t *testing.T) {
	lanes := map[string]func(*config.Lane){
		"default": func(*config.Lane) {},
		"dual":    func(l *config.Lane) { l.IPFamily = config.IPFamilyDual },
		"ipv6 calico": func(l *config.Lane) {
			l.IPFamily, l.CNI = config.IPFamilyIPv6, config.CNICalico
		},
		"netdevice mirror": func(l *config.Lane) {
			l.VFDriver, l.ImageRegistryMirror = config.VFDriverNetdevice, "http://mirror.local:5000"
		},
		"one agent, no registry": func(l *config.Lane) { l.Agents, l.Registry.Enabled = 1, new(bool) },
	}
	for name, mod := range lanes {
		for _, cg := range []CgroupMode{CgroupV2, CgroupV1} {
			l := config.Default()
			l.Name = "pvlabels"
			mod(l)
			host := allHost()
			host.Cgroup = cg
			sc, err := ClusterConfig(l, host)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cc, err := k3dconfig.TransformSimpleToClusterConfig(context.Background(), runtimes.Docker, *sc, "")
			if err != nil {
				t.Fatalf("%s: k3d rejected the translation: %v", name, err)
			}
			for _, n := range cc.Nodes {
				var labels []string
				for k, v := range n.K3sNodeLabels {
					labels = append(labels, k+"="+v)
				}
				labels = append(labels, nodeFlagValues(n.Args, "--node-label")...)
				var taints []string
				taints = append(taints, nodeFlagValues(n.Args, "--node-taint")...)
				for _, ka := range nodeFlagValues(n.Args, "--kubelet-arg") {
					k, v, _ := strings.Cut(strings.TrimPrefix(ka, "--"), "=")
					switch k {
					case "node-labels":
						labels = append(labels, strings.Split(v, ",")...)
					case "register-with-taints":
						taints = append(taints, strings.Split(v, ",")...)
					}
				}
				for _, kv := range labels {
					k, v, _ := strings.Cut(kv, "=")
					if err := kubeletLabelError(k, v); err != nil {
						t.Errorf("%s (cgroup %s), %s: %v", name, cg, n.Name, err)
					}
				}
				for _, s := range taints {
					if err := kubeletTaintError(s); err != nil {
						t.Errorf("%s (cgroup %s), %s: %v", name, cg, n.Name, err)
					}
				}
			}
		}
	}
}
