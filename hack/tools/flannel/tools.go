//go:build tools

// Package flannel pins flanneld v0.28.9 (the module's root package) and
// install-conf (cmd/install_conf) for the
// ghcr.io/flannel-io/flannel:v0.28.9 image the rig builds locally.
package flannel

import (
	_ "github.com/flannel-io/flannel"
	_ "github.com/flannel-io/flannel/cmd/install_conf"
)
