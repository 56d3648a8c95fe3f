module github.com/sriov-lane/sriov-lane/test/standin/sriovcni

go 1.26.3

require (
	github.com/containernetworking/cni v1.3.1
	github.com/containernetworking/plugins v1.9.1
	github.com/sriov-lane/sriov-lane v0.0.0
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/sys v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-iptables v0.8.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/safchain/ethtool v0.6.2 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.opentelemetry.io/otel v1.44.0 // indirect
	go.opentelemetry.io/otel/trace v1.44.0 // indirect
	sigs.k8s.io/knftables v0.0.18 // indirect
)

// The stand-in shares test/standin/rigsysfs with the device plugin
// stand-in; its own module keeps the CNI libraries out of the product's
// dependency graph.
replace github.com/sriov-lane/sriov-lane => ../../..
