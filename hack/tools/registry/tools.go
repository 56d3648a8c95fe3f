//go:build tools

// Package registry pins the Docker registry (distribution v3) that the
// stand-in registry image runs; its own module keeps its dependencies from
// shifting the kube-apiserver build.
package registry

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
