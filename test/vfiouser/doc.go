// Package vfiouser is a VFIO user as QEMU is one: it takes a VF's device
// fd (container, group, type1 IOMMU, VFIO_GROUP_GET_DEVICE_FD) and holds
// it, which is what the kernel blocks a VF's unbind and removal on. One
// implementation for the three places that hold a VF: the kernel tier's
// guest (a real kernel), the rig's fake /dev/vfio (which answers the same
// ioctls) and test/rig/cmd/vfio-hold inside a node.
//
// Where things live (TestDocFileMap keeps this list true):
//   - vfiouser.go: the ioctl numbers, HoldDevice and DeviceHold
package vfiouser
