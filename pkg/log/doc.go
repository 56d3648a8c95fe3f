// Package log is sriov-lane's one way of telling the user what happens: a
// Logger passed down from the command to every package that has something
// to say, shaped as kind's (kubernetes-sigs/kind pkg/log/types.go@63d3c85:
// Warn, Error and V(level) Info, a subset of klog), and the step printer
// the commands drive (Printer).
//
// Everything written here goes to the command's stderr; stdout holds only
// results (status, plan, -o json), so they pipe cleanly, as kind's do.
//
// Where things live (TestDocFileMap keeps this list true):
//   - types.go:   Logger and InfoLogger, what a package that reports takes;
//     Level; Noop, for tests and callers with nothing to show
//   - printer.go: Printer, a line per step with its duration (a spinner
//     only on a terminal outside CI), and the Logger of what the step runs
package log
