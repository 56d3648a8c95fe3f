//go:build tools

// Package tools pins golangci-lint, which make verify builds into bin/ and
// runs with hack/tools/.golangci.yml. It has a module of its own because its
// dependencies (golang.org/x/tools among them) would otherwise move the
// versions the Kubernetes binaries in hack/tools are built with.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
