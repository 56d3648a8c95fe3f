module github.com/sriov-lane/sriov-lane/test/standin/flannelcni

go 1.26.0

require github.com/containernetworking/cni v1.3.1

require (
	github.com/vishvananda/netns v0.0.4 // indirect
	go.opentelemetry.io/otel v1.29.0 // indirect
	go.opentelemetry.io/otel/trace v1.29.0 // indirect
	golang.org/x/sys v0.23.0 // indirect
)
