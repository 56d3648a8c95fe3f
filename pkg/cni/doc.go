// Package cni builds and applies the lane's network components: Multus
// (thick), sriov-cni, the SR-IOV network device plugin (or, in DRA mode,
// dra-driver-sriov in place of both), the network-resources-injector and
// the primary CNI (Flannel or Calico through the Tigera operator). Objects are typed k8s.io/api values converted to
// unstructured for server-side apply and for `plan` output; waits watch the
// API instead of sleeping.
//
// Where things live (TestDocFileMap keeps this list true):
//   - options.go:      Options, what every object depends on, and its
//     defaults (namespace, CNI dirs, labels, field manager)
//   - objects.go:      Components, the lane's components in order; apply
//     order by kind, ToUnstructured, Render for plan
//   - images.go:       the pinned component images, MirrorImage and the
//     images of a set of objects
//   - helpers.go:      small builders the components share (volumes,
//     tolerations, env, selectors)
//   - flannel.go:      Flannel's objects, its conflist and net-conf, and the
//     copier of k3s's standard CNI plugins
//   - calico.go:       Calico: the pinned, checksummed Tigera manifests
//     (download, cache, decode) and the Installation
//   - multus.go:       Multus thick's objects and daemon config
//   - sriov.go:        sriov-cni and device plugin objects; restarting the
//     device plugin on a node
//   - dpconfig.go:     the device plugin's config.json: built for the lane,
//     parsed and refused as the plugin would
//   - dra.go:          DRA mode's dra-driver-sriov objects (its chart as
//     kubevirtci renders it) and default SriovResourcePolicy
//   - dracrd.go:       the driver's SriovResourcePolicy and
//     DeviceAttributes CRDs
//   - injector.go:     network-resources-injector's objects and webhook
//   - injectorcert.go: the injector webhook's CA and serving certificate
//   - nadcrd.go:       the NetworkAttachmentDefinition CRD
//   - apply.go:        Apply, server-side apply in tiers, CRDs waited
//     Established before their objects
//   - watch.go:        watchUntil, the informer-backed wait every wait here
//     is built on
//   - wait.go:         waits for nodes Ready, DaemonSets, allocatable VFs,
//     pods Ready and a pod gone
//   - rollout.go:      the rollout wait shared by DaemonSets and Deployments
//   - injectorwait.go: Deployments rolled out; the injector's webhook
//     answering
//   - calicowait.go:   Calico Available as the Tigera operator reports it
//   - drawait.go:      DRA mode's readiness: each agent's pool of
//     dra-driver-sriov ResourceSlices holding its VFs
//   - diagnose.go:     what a failed wait prints: events, node conditions,
//     pods not ready
//   - pullwatch.go:    ReportPullFailures, image pulls kubelet fails, shown
//     while up waits
package cni
