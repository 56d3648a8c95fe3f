package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
)

// cniBinDir is where the driver's libcni looks for plugins, and the only
// place (cmd/dra-driver-sriov/main.go@14490e9d438b: cni.New(..., []string{"/opt/cni/bin"})).
const cniBinDir = "/opt/cni/bin"

// nriPlugin is pkg/nri/nri.go@14490e9d438b in STANDALONE: at a pod
// sandbox's start, CNI ADD of each device prepared for the pod, straight
// through libcni with the NAD's config (name set to the driver's when it
// has none, GetCNIConfigFromSpec); at its stop, CNI DEL. A pod with no
// devices, or (at start) no network namespace, is let be.
type nriPlugin struct {
	p   *plugin
	cni *libcni.CNIConfig
}

func startNRI(ctx context.Context, p *plugin, onClose func()) (stub.Stub, error) {
	n := &nriPlugin{p: p, cni: libcni.NewCNIConfig([]string{cniBinDir}, &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}})}
	s, err := stub.New(n, stub.WithOnClose(onClose))
	if err != nil {
		return nil, fmt.Errorf("failed to create NRI plugin: failed to create plugin stub: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return nil, fmt.Errorf("failed to start NRI plugin: %w", err)
	}
	return s, nil
}

func netnsOf(pod *api.PodSandbox) string {
	for _, ns := range pod.GetLinux().GetNamespaces() {
		if ns.GetType() == "network" {
			return ns.GetPath()
		}
	}
	return ""
}

func (n *nriPlugin) runtimeConf(pod *api.PodSandbox, netns string, d preparedDevice) (*libcni.PluginConfig, *libcni.RuntimeConf, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(d.NetConf), &raw); err != nil {
		return nil, nil, fmt.Errorf("failed to GetCNIConfigFromSpec: failed to unmarshal Spec.Config: %v", err)
	}
	if name, ok := raw["name"]; !ok || name == "" {
		raw["name"] = driverName
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, nil, err
	}
	conf, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to NetworkPluginConfFromBytes: %v", err)
	}
	return conf, &libcni.RuntimeConf{
		ContainerID: pod.GetId(), NetNS: netns, IfName: d.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "true"},
			{"K8S_POD_NAMESPACE", pod.GetNamespace()},
			{"K8S_POD_NAME", pod.GetName()},
			{"K8S_POD_INFRA_CONTAINER_ID", pod.GetId()},
			{"K8S_POD_UID", pod.GetUid()},
		},
	}, nil
}

func (n *nriPlugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	devs := n.p.devicesOfPod(pod.GetUid())
	if len(devs) == 0 {
		return nil
	}
	netns := netnsOf(pod)
	if netns == "" {
		log.Printf("no network namespace for pod %s/%s: skipping network attachment", pod.GetNamespace(), pod.GetName())
		return nil
	}
	for _, d := range devs {
		conf, rt, err := n.runtimeConf(pod, netns, d)
		if err == nil {
			var res any
			res, err = n.cni.AddNetwork(ctx, conf, rt)
			if err == nil && res == nil {
				err = fmt.Errorf("cni result is nil")
			}
		}
		if err != nil {
			return fmt.Errorf("failed to attach network: %w", err)
		}
		log.Printf("attached %s (%s) as %s to pod %s/%s", d.Device, d.PCI, d.IfName, pod.GetNamespace(), pod.GetName())
	}
	return nil
}

func (n *nriPlugin) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	devs := n.p.devicesOfPod(pod.GetUid())
	if len(devs) == 0 {
		return nil
	}
	netns := netnsOf(pod)
	if netns == "" {
		return fmt.Errorf("error getting network namespace for pod '%s' in namespace '%s'", pod.GetName(), pod.GetNamespace())
	}
	for _, d := range devs {
		conf, rt, err := n.runtimeConf(pod, netns, d)
		if err == nil {
			err = n.cni.DelNetwork(ctx, conf, rt)
		}
		if err != nil {
			return fmt.Errorf("error CNI.DetachNetwork for pod '%s' (uid: %s) in namespace '%s': failed to DelNetwork: %v", pod.GetName(), pod.GetUid(), pod.GetNamespace(), err)
		}
	}
	return nil
}
