module github.com/sriov-lane/sriov-lane/test/standin/sriovdp

go 1.26.3

require (
	github.com/sriov-lane/sriov-lane v0.0.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.47.0
	google.golang.org/grpc v1.82.1
	k8s.io/kubelet v0.37.2
)

require (
	github.com/hanwen/go-fuse/v2 v2.12.1 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)

// The stand-in shares the rig's FUSE kernel (test/rig/sysfs), its netns
// helper and where it finds the rig's sysfs (test/standin/rigsysfs) with the
// project's module; its own module keeps
// the kubelet API and gRPC out of the product's dependency graph.
replace github.com/sriov-lane/sriov-lane => ../../..
