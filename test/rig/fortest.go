package rig

import (
	"context"
	"log"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// Rig is a running rig in a test.
type Rig struct {
	Dir   string
	State *State
	Tree  sysfs.Tree
	// Server serves the fake sysfs and /dev/vfio from this process.
	Server *sysfs.Server
}

// LaneConfigPath is DIR/lane.yaml.
func (r *Rig) LaneConfigPath() string { return filepath.Join(r.Dir, LaneFile) }

// TestOption changes the Options NewForTest brings its rig up with.
type TestOption func(*Options)

// WithVFDriver makes the fake kernel stand in for the NIC whose VFs take
// the kernel driver d (Options.VFDriver), e.g. "igbvf".
func WithVFDriver(d string) TestOption { return func(o *Options) { o.VFDriver = d } }

// NewForTest brings up a rig with n PFs named <prefix>0.. and serves its
// fake sysfs and /dev/vfio (FUSE) from the test process. Everything is undone when the test
// ends, even if it fails. Use a prefix unique to the test (see the brief's
// name rules: links rg*, netns rg-*, so e.g. "rg-x").
func NewForTest(t testing.TB, n int, prefix string, opts ...TestOption) *Rig {
	t.Helper()
	testutil.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "rig")
	// Registered first so it runs last, after the server has unmounted.
	t.Cleanup(func() {
		if err := Down(dir); err != nil {
			t.Errorf("rig down: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := Options{Dir: dir, PFs: n, Prefix: prefix, ImageMirror: testutil.RigImageMirror()}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := Up(ctx, o)
	if err != nil {
		t.Fatalf("rig up: %v", err)
	}
	w := &testWriter{t: t}
	srv, err := sysfs.Serve(s.ServeConfig(dir, log.New(w, "emulator: ", 0)))
	if err != nil {
		t.Fatalf("serving the fake sysfs: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("fake sysfs: %v", err)
		}
		w.stop()
	})
	return &Rig{Dir: dir, State: s, Tree: sysfs.Tree{Root: s.SysfsRoot}, Server: srv}
}

// testWriter sends emulator logs to the test log, which go test shows
// only on failure or with -v. Logging after the test ends panics, so the
// emulator is always stopped in a cleanup first.
type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// stop drops later lines: a request the kernel still sends while the
// test ends must not log into a finished test.
func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
