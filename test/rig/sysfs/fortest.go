package sysfs

import "testing"

// ServeForTest serves cfg as Serve does, for a test: it fails the test if
// the fake sysfs cannot be served, and closes it when the test ends.
func ServeForTest(t testing.TB, cfg ServeConfig) *Server {
	t.Helper()
	srv, err := Serve(cfg)
	if err != nil {
		t.Fatalf("serving the fake sysfs: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the fake sysfs: %v", err)
		}
	})
	return srv
}
