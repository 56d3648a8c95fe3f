//go:build tools

// Package injector pins network-resources-injector v1.9.0's two programs, webhook
// and installer, as scripts/build.sh@v1.9.0 builds them into the
// ghcr.io/k8snetworkplumbingwg/network-resources-injector:v1.9.0 image the
// rig builds locally (Dockerfile@v1.9.0).
package injector

import (
	_ "github.com/k8snetworkplumbingwg/network-resources-injector/cmd/installer"
	_ "github.com/k8snetworkplumbingwg/network-resources-injector/cmd/webhook"
)
