//go:build tools

// Package tools pins the upstream programs the hardware-free tests run:
// a real kube-apiserver and etcd, and the kube-controller-manager,
// kube-scheduler and kubelet of the stand-in k3s nodes, built from Go modules because no
// container registry or release download is reachable from the test machines.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
