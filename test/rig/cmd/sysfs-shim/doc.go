// Command sysfs-shim runs a real CNI plugin that reads the kernel's /sys
// against the rig's fake sysfs. Installed as /opt/cni/bin/NAME in a rig
// lane's node, with the real plugin at RealDir/NAME, it takes a mount
// namespace of its own, mounts the rig's sysfs (rigsysfs.NodePath, which
// the rig's lane config mounts in every agent) over /sys there, and
// executes the real plugin with its arguments, environment and streams.
// The host-device plugin finds the PF Multus names by its PCI address
// under /sys/bus/pci/devices (containernetworking/plugins
// plugins/main/host-device/host-device.go@v1.9.1 sysBusPCI), which a build
// machine's /sys does not have; its netlink and netns work is the real
// thing on the stand-in PFs. A static binary (CGO_ENABLED=0) runs in any
// node image; Multus's daemon runs it chrooted into the node's root,
// privileged.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go: the mount namespace, the mount and the exec
package main
