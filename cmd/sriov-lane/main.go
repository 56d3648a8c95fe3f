// Command sriov-lane brings up and tears down local Kubernetes test lanes
// with real SR-IOV NICs. All logic lives in pkg/; this only wires the CLI.
package main

import (
	"os"

	"github.com/sriov-lane/sriov-lane/pkg/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:], cmd.IOStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
