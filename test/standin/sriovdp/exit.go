package main

import "fmt"

// exit is how the plugin's process ends, with the status upstream's ends
// with on the same input, so that kubelet and anyone reading the pod see
// the same: cmd/sriovdp/main.go@v3.11.0 logs most failures and returns
// from main (status 0: the container completes and is restarted), calls
// glog.Fatalf for invalid configs and a failed registration, and some
// inputs make it dereference nil and panic. golang/glog glog.go@v1.2.5
// flushAndAbort ends a Fatal with SIGABRT, which the Go runtime turns into
// status 2, as it does a panic. Argument errors are the image
// entrypoint's (images/entrypoint.sh@v3.11.0: exit 1) or the flag
// package's (status 2).
type exit struct {
	code int
	err  error
}

func (e *exit) Error() string { return e.err.Error() }
func (e *exit) Unwrap() error { return e.err }

// returned is an error upstream logs before returning from main.
func returned(format string, a ...any) error {
	return &exit{code: 0, err: fmt.Errorf(format, a...)}
}

// fatalf is a glog.Fatalf.
func fatalf(format string, a ...any) error {
	return &exit{code: 2, err: fmt.Errorf(format, a...)}
}

// panicked is where upstream dereferences nil.
func panicked(format string, a ...any) error {
	return &exit{code: 2, err: fmt.Errorf("panic (as upstream): "+format, a...)}
}
