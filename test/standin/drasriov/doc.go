// Command drasriov stands in for dra-driver-sriov
// (ghcr.io/k8snetworkplumbingwg/dra-driver-sriov:14490e9, commit
// 14490e9d438b), whose Go module the proxy refuses. It does what the
// driver at that commit does in STANDALONE mode, read in
// k8snetworkplumbingwg/dra-driver-sriov at the commit (cited by path in the
// code):
//
//   - discovers the VFs of every PF whose netdev it sees, once at start;
//   - registers a kubelet DRA plugin (k8s.io/dynamic-resource-allocation's
//     kubeletplugin helper, as upstream) and publishes one pool named for
//     the node with the devices the namespace's SriovResourcePolicies
//     select, again at every change of them;
//   - prepares a claimed VF: its NetworkAttachmentDefinition's config with
//     the VF's deviceID, the claim's and the pod's CDI devices (the VFIO
//     device nodes for driver vfio-pci), the applied config in the claim's
//     status; unprepares by removing them;
//   - as an NRI plugin, runs the NAD's CNI plugin from /opt/cni/bin (the
//     sriov-cni its init container copies there) for each prepared device
//     when the pod's sandbox starts, and again (DEL) when it stops.
//
// It refuses what it does not implement, loudly: MULTUS mode,
// DeviceAttributes, a driver binding it would have to change (the lane
// binds every VF at up). Its own: it finds the rig's sysfs through
// test/standin/rigsysfs (through /proc/1/root, as the pod has hostPID),
// reads class, vendor and device where upstream's ghw reads modalias, and
// its VFIO host device nodes are character devices it makes, as the device
// plugin stand-in's are. conformance_test.go holds the inputs, row by row.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:     options and run: discovery, registration, publishing,
//     NRI, shutdown
//   - discover.go: the VFs found in sysfs and their attributes
//   - policy.go:   SriovResourcePolicies: which devices are published
//   - prepare.go:  prepare and unprepare: configs, the NAD, CDI specs, the
//     checkpoint
//   - nri.go:      the NRI hooks: CNI ADD and DEL at sandbox start and stop
package main
