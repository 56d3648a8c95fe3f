//go:build tools

// Package multus pins Multus v4.3.0's programs, as hack/build-go.sh@v4.3.0
// builds them into the ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick
// image the rig builds locally (images/Dockerfile.thick@v4.3.0).
package multus

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/cert-approver"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/install_multus"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/kubeconfig_generator"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-daemon"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-shim"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/passthru-cni"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/thin_entrypoint"
)
