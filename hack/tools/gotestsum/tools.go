//go:build tools

// Package tools pins gotestsum, which runs the tests when CI sets ARTIFACTS
// and writes their JUnit report there, as kind's hack/make-rules/test.sh
// does. A module of its own for the same reason as hack/tools/golangci-lint:
// its dependencies stay out of the Kubernetes build in hack/tools.
package tools

import (
	_ "gotest.tools/gotestsum"
)
