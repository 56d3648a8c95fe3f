module github.com/sriov-lane/sriov-lane/test/standin/sriovcni

go 1.26.3

// The CNI libraries sriov-cni v2.10.0 links (go.mod@v2.10.0): cni v1.3.0,
// and plugins at c860b78de419, whose pseudo-version the checksum database
// does not have; v1.4.1's pkg/ tree is the same (git diff c860b78de419
// v1.4.1 -- pkg/ is empty), so ipam.ConfigureIface and ns are upstream's.
require (
	github.com/containernetworking/cni v1.3.0
	github.com/containernetworking/plugins v1.4.1
	github.com/sriov-lane/sriov-lane v0.0.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.47.0
)

require (
	github.com/coreos/go-iptables v0.8.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/safchain/ethtool v0.6.2 // indirect
)

// The stand-in shares test/standin/rigsysfs with the device plugin
// stand-in; its own module keeps the CNI libraries out of the product's
// dependency graph.
replace github.com/sriov-lane/sriov-lane => ../../..
