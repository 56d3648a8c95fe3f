package rig

import (
	"context"
	"log"
	"path/filepath"
	"strings"
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
}

// LaneConfigPath is DIR/lane.yaml.
func (r *Rig) LaneConfigPath() string { return filepath.Join(r.Dir, LaneFile) }

// NewForTest brings up a rig with n PFs named <prefix>0.. and runs its
// emulator inside the test process. Everything is undone when the test
// ends, even if it fails. Use a prefix unique to the test (see the brief's
// name rules: links rg*, netns rg-*, so e.g. "rg-x").
func NewForTest(t testing.TB, n int, prefix string) *Rig {
	t.Helper()
	testutil.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "rig")
	// Registered first so it runs last, after the emulator has stopped.
	t.Cleanup(func() {
		if err := Down(dir); err != nil {
			t.Errorf("rig down: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Up(ctx, Options{Dir: dir, PFs: n, Prefix: prefix})
	if err != nil {
		t.Fatalf("rig up: %v", err)
	}
	r := &Rig{Dir: dir, State: s, Tree: sysfs.Tree{Root: s.SysfsRoot}}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	em := sysfs.NewEmulator(sysfs.EmulatorConfig{
		Root:      s.SysfsRoot,
		VFIODir:   s.VFIODir,
		PeerNetns: s.PeersNetns,
		Log:       log.New(testWriter{t}, "emulator: ", 0),
		Ready:     func() { close(ready) },
	})
	go func() { done <- em.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("emulator: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("emulator failed to start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("emulator not ready within 10s")
	}
	return r
}

// testWriter sends emulator logs to the test log, which go test shows
// only on failure or with -v. Logging after the test ends panics, so the
// emulator is always stopped in a cleanup first.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
