// Command sriov stands in for sriov-cni
// (ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0), whose Go module the
// proxy refuses. It does what sriov-cni v2.10.0 does, read in
// k8snetworkplumbingwg/sriov-cni at that tag (cited by path in the code),
// for the netconfs the product's smoke network and KubeVirt's SR-IOV
// networks give it:
//
//   - ADD takes the VF from "deviceID" (Multus fills it in from the device
//     plugin's allocation). A VF with a netdev (found in
//     <sysfs>/bus/pci/devices/<deviceID>/net/) is moved into CNI_NETNS,
//     renamed CNI_IFNAME, given the MAC asked for, brought up and
//     addressed by the delegated IPAM plugin; a VF bound to a DPDK driver
//     (vfio-pci) has no netdev and is only reported, with IPAM's addresses
//     if any, as upstream does. The conf is cached under
//     /var/lib/cni/sriov/<container>-<ifname> and the VF marked taken under
//     /var/lib/cni/sriov/pci.
//   - DEL releases IPAM and moves the netdev back to the node's netns
//     under its original name, from the cache. CHECK does nothing, as
//     upstream's. VERSION and the rest are the CNI library's.
//
// The stand-in's own parts: sysfs is the rig's fake one, found by
// test/standin/rigsysfs; nothing is set through the PF's VF table (a
// stand-in PF is a veth and has none), so what only that table could do is
// refused (see netConf.applyVFConfig); no gratuitous ARP or unsolicited
// neighbour advertisement follows ADD (upstream sends them best-effort).
// It links the CNI libraries upstream links (go.mod). conformance_test.go
// holds the inputs, row by row, with what v2.10.0 does with each and where
// it is read. For tests, SRIOV_CNI_STANDIN_SYSFS and SRIOV_CNI_STANDIN_DIR
// replace the sysfs search and /var/lib/cni/sriov.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:  the CNI commands in upstream's order (ADD, DEL, CHECK); the
//     VF's netdev into the pod's netns and back (setupVF, releaseVF)
//   - conf.go:  the netconf, loaded and checked as upstream does; what the
//     stand-in refuses (applyVFConfig); the cache DEL reads; the per-VF
//     lock and allocation files
//   - sysfs.go: the VF's PF, index, netdev and driver, read from the rig's
//     sysfs as upstream reads /sys; nothing there is written
//
// entrypoint.sh is the image's entrypoint, upstream's contract: the plugin
// copied into the host's CNI bin dir, then sleep.
package main
