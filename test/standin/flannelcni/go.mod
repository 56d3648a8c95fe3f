module github.com/sriov-lane/sriov-lane/test/standin/flannelcni

go 1.26.0

// The CNI library flannel-io/cni-plugin links (go.mod@v1.9.1-flannel1).
require github.com/containernetworking/cni v1.3.0

require (
	github.com/vishvananda/netns v0.0.4 // indirect
	golang.org/x/sys v0.23.0 // indirect
)
