package cmd

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time by the Makefile through -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

// VersionInfo is what `sriov-lane version` prints.
type VersionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
	K3d     string `json:"k3dLibrary"`
}

func versionInfo() VersionInfo {
	v := VersionInfo{Version: version, Commit: commit, Go: runtime.Version(), K3d: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/k3d-io/k3d/v5" {
				v.K3d = d.Version
			}
		}
	}
	return v
}

func newVersionCmd(g *globals) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:     "version",
		Short:   "Print sriov-lane's version, commit, Go and k3d library versions",
		Example: "  sriov-lane version\n  sriov-lane version -o json",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := versionInfo()
			if output == "json" {
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintln(g.streams.Out, string(b))
				return nil
			}
			fmt.Fprintf(g.streams.Out, "sriov-lane %s (commit %s, %s, k3d library %s)\n", v.Version, v.Commit, v.Go, v.K3d)
			return nil
		},
	}
	outputFlag(c, &output, "text", "json")
	return c
}
