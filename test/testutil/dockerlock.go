package testutil

import (
	"os"
	"slices"
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

// dockerLocks are this process's holds: the test (with its subtests)
// holding the lock alone, whose own calls to RequireDockerClient must not
// wait for itself, and each test's shared holds, which RequireDockerAlone
// drops for the test that asks to be alone.
var dockerLocks struct {
	sync.Mutex
	alone  string
	shared map[string][]*os.File
}

// RequireDockerAlone waits until no other test uses the host's Docker and
// holds it alone until t ends; RequireDockerClient under t then takes
// nothing more. What t set up with Docker before (its lanes up, beside the
// other tests) stays: t's own shared holds are dropped first, or t would
// wait for itself.
func RequireDockerAlone(t testing.TB) {
	t.Helper()
	dockerLocks.Lock()
	for name, files := range dockerLocks.shared {
		if underTest(name, t.Name()) {
			for _, f := range files {
				f.Close() // os.File closes once: t's cleanup closing it again is a no-op
			}
			delete(dockerLocks.shared, name)
		}
	}
	dockerLocks.Unlock()
	lockDocker(t, unix.LOCK_EX)
	dockerLocks.Lock()
	dockerLocks.alone = t.Name()
	dockerLocks.Unlock()
	t.Cleanup(func() {
		dockerLocks.Lock()
		dockerLocks.alone = ""
		dockerLocks.Unlock()
	})
}

// holdsDockerAlone reports whether t is, or runs under, the test holding
// the host's Docker alone.
func holdsDockerAlone(t testing.TB) bool {
	dockerLocks.Lock()
	defer dockerLocks.Unlock()
	return dockerLocks.alone != "" && underTest(t.Name(), dockerLocks.alone)
}

// underTest reports whether the test named name is parent or one of its
// subtests.
func underTest(name, parent string) bool {
	return name == parent || strings.HasPrefix(name, parent+"/")
}

// lockDocker takes the Docker lock as how says (unix.LOCK_SH, LOCK_EX),
// waiting for it, until t ends.
func lockDocker(t testing.TB, how int) {
	t.Helper()
	f, err := openLockFile(dockerLockFile)
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
	if how == unix.LOCK_SH {
		dockerLocks.Lock()
		if dockerLocks.shared == nil {
			dockerLocks.shared = map[string][]*os.File{}
		}
		dockerLocks.shared[t.Name()] = append(dockerLocks.shared[t.Name()], f)
		dockerLocks.Unlock()
	}
	// Closing the file drops the lock.
	t.Cleanup(func() {
		f.Close()
		dockerLocks.Lock()
		defer dockerLocks.Unlock()
		if files := dockerLocks.shared[t.Name()]; len(files) > 0 {
			dockerLocks.shared[t.Name()] = slices.DeleteFunc(files, func(g *os.File) bool { return g == f })
		}
	})
}
