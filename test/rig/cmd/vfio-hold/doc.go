// Command vfio-hold holds a VF's VFIO device through the rig's fake
// /dev/vfio the way QEMU of a running VM does (container, type1 IOMMU,
// VFIO_GROUP_GET_DEVICE_FD; test/vfiouser HoldDevice), until it is told to
// stop: what a test runs in a node container to make the kernel, real or
// fake, block that VF's unbind. A static binary (CGO_ENABLED=0) runs in
// any node image. It prints "holding BDF" once it holds it.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go: the hold, until SIGTERM or SIGINT
package main
