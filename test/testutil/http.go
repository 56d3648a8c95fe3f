package testutil

import "net/http"

// RoundTripperFunc is an http.RoundTripper of a func: a test's stand-in for
// a server behind a client it cannot point elsewhere.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
