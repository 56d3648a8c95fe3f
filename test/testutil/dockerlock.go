package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The host's Docker is shared by every test that uses it and restarted by
// one (test/e2e TestDockerdRestartedLanesRepaired), which stops every
// container on the host. So a test that uses Docker holds dockerLockFile
// shared (RequireDockerClient takes it before it even asks Docker, as
// dockerd may be restarting) and the restarting test holds it alone
// (RequireDockerAlone): it waits until no other test uses Docker, and tests
// that would use Docker meanwhile wait for it. flock(2) on a file in
// slotDir, so every test process on the machine shares the lock, and a
// killed process holds nothing.
const dockerLockFile = "dockerd.lock"

// dockerAlone is the test (and its subtests) holding the lock alone in this
// process: its own calls to RequireDockerClient must not wait for itself.
var dockerAlone struct {
	sync.Mutex
	name string
}

// RequireDockerAlone waits until no other test uses the host's Docker and
// holds it alone until t ends; RequireDockerClient under t then takes
// nothing more.
func RequireDockerAlone(t testing.TB) {
	t.Helper()
	lockDocker(t, unix.LOCK_EX)
	dockerAlone.Lock()
	dockerAlone.name = t.Name()
	dockerAlone.Unlock()
	t.Cleanup(func() {
		dockerAlone.Lock()
		dockerAlone.name = ""
		dockerAlone.Unlock()
	})
}

// holdsDockerAlone reports whether t is, or runs under, the test holding
// the host's Docker alone.
func holdsDockerAlone(t testing.TB) bool {
	dockerAlone.Lock()
	defer dockerAlone.Unlock()
	n := dockerAlone.name
	return n != "" && (t.Name() == n || strings.HasPrefix(t.Name(), n+"/"))
}

// lockDocker takes the Docker lock as how says (unix.LOCK_SH, LOCK_EX),
// waiting for it, until t ends.
func lockDocker(t testing.TB, how int) {
	t.Helper()
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		t.Fatalf("taking the Docker lock: %v", err)
	}
	_ = os.Chmod(slotDir, 0o1777)
	f, err := os.OpenFile(filepath.Join(slotDir, dockerLockFile), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("taking the Docker lock: %v", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("taking the Docker lock: %v", err)
	}
	// Closing the file drops the lock.
	t.Cleanup(func() { f.Close() })
}
