// Command k3s is a stand-in for the k3s binary inside k3d node containers,
// for tests on machines without a container registry. It is a thin
// supervisor: it honours the contract k3d v5.9.0 relies on (subcommands,
// log lines, kubeconfig and CoreDNS manifest locations) and starts real
// components built from Go modules with the flags k3s would give them: on
// a server etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler; on every node containerd (runc, the CNI plugins in /bin)
// and kubelet. Pods really run. Flags it does not know are errors, as in
// k3s, so a wrong flag in the product fails on the rig.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:       the subcommands (server, agent, kubectl, noop,
//     version), signals, and the k3s-style log lines k3d waits for
//   - flags.go:      every server/agent flag the stand-in accepts; any
//     other is an error, as in k3s
//   - args.go:       --<component>-arg merged over k3s's defaults, as k3s
//     merges them
//   - netconfig.go:  node addresses, cluster and service CIDRs and cluster
//     DNS, checked as k3s checks them
//   - server.go:     the server: etcd, kube-apiserver, controller manager,
//     scheduler, then the node half; kubeconfig and manifests for k3d
//   - agent.go:      the agent: K3S_URL resolved, the server waited for,
//     the node half started
//   - runtime.go:    the node half every k3s node runs: containerd, airgap
//     images, kubelet's config, kube-proxy, host sysctls shielded
//   - node.go:       the Node labels and roles k3s patches beside kubelet
//   - registries.go: registries.yaml rendered into containerd's hosts
//     files; what the stand-in does not honour refused
//   - packaged.go:   k3s's packaged components: its CRDs, the manifests it
//     deploys (CoreDNS, local-path-provisioner) and their Addons, each
//     fact cited
//   - proc.go:       starting a component with its logs where k3s's go
//   - kubectl.go:    the in-process kubectl, KUBECONFIG defaulted as k3s
//     does
package main
