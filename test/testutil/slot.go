package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A Slot is one test's share of what tests running at the same time on
// this machine must not share: lane names, rig prefixes and TCP ports.
// `make test` runs packages in parallel (-p 4: test/e2e, test/standin/k3drig,
// pkg/provider, pkg/cni, ...) and tests inside a package with t.Parallel,
// and other checkouts may use the same dockerd and kernel, so a name or
// port chosen by hand per test collides sooner or later. Slot n is held
// through an flock(2) on slotDir/<n> from TakeSlot to the test's end; the
// kernel drops the lock when the process dies, so a killed run holds
// nothing.
//
// Names are short and of fixed width, hence prefix-free (no slot's name is
// the beginning of another's, which the e2e snapshots and the lane
// configs' "<prefix>*" PF patterns rely on):
//
//   - RigPrefix is "rt" and two base-36 digits ("rt0a"): a rig names its
//     PFs <prefix><pf> and the VFs' netdevs <prefix><pf>v<vf>, and a link
//     name has at most 15 bytes (IFNAMSIZ - 1); "rt0a9v7" has 7. No other
//     test names links "rt*".
//   - Lane(i) is "e2e-", the two digits and i ("e2e-0a0"): k3d names the
//     lane's nodes k3d-<lane>-agent-N, which must stay a hostname (pkg/config
//     caps lane names at 32 bytes for that).
//   - Port hands out the slot's portsPerSlot ports, from portBase + n *
//     portsPerSlot: below Linux's ephemeral range (32768 and up by default),
//     so no outgoing connection takes one between the test choosing it and
//     dockerd binding it, as can happen to a port the kernel picked.
type Slot struct {
	n    int
	mu   sync.Mutex
	next int
	kept bool
}

const (
	// slotDir holds one lock file per slot. A fixed path, not TMPDIR
	// (test/e2e's TestMain moves that), so every test process on the
	// machine sees the same locks; mode 1777 as /tmp's, so tests of any
	// user can take slots.
	slotDir = "/tmp/sriov-lane-test-slots"
	// slots is how many tests can hold a slot at once: more than the
	// parallel tests of every package of `make test` together.
	slots = 200
	// portBase and portsPerSlot give slots the ports 17000-17799. A test
	// needs one a lane, plus one for a registry.
	portBase     = 17000
	portsPerSlot = 4
)

// TakeSlot takes the first free slot until the test ends. A slot whose
// ports something else (not a test) listens on is passed over.
func TakeSlot(t testing.TB) *Slot {
	t.Helper()
	for n := range slots {
		f, err := openLockFile(strconv.Itoa(n))
		if err != nil {
			t.Fatalf("taking a test slot: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			t.Fatalf("taking test slot %d: %v", n, err)
		}
		s := &Slot{n: n}
		if !s.portsFree() {
			f.Close()
			continue
		}
		// Closing the file drops the lock. A kept slot's lock goes on with
		// a bare duplicate of the descriptor, never closed: flock(2) locks
		// the open file, which the duplicate shares, and an *os.File left
		// open would be closed by its finalizer at the next GC.
		t.Cleanup(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.kept {
				if _, err := unix.Dup(int(f.Fd())); err != nil {
					t.Errorf("keeping test slot %d: %v", n, err)
				}
			}
			f.Close()
		})
		return s
	}
	t.Fatalf("taking a test slot: all %d slots in %s are held", slots, slotDir)
	return nil
}

// Keep holds the slot until the test process ends, not only until the
// test does: what the test made under the slot's names outlived it (a lane
// whose down failed), and a test that took the slot next would meet it
// and fail for it, as one stuck lane once failed five other tests.
func (s *Slot) Keep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = true
}

func (s *Slot) portsFree() bool {
	for i := range portsPerSlot {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(s.port(i)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

func (s *Slot) id() string {
	id := strconv.FormatInt(int64(s.n), 36)
	if len(id) < 2 {
		id = "0" + id
	}
	return id
}

func (s *Slot) port(i int) int { return portBase + s.n*portsPerSlot + i }

// RigPrefix names the slot's rig links and netns (rig.Options.Prefix).
func (s *Slot) RigPrefix() string { return "rt" + s.id() }

// Lane is the slot's i-th lane name, i in 0..9.
func (s *Slot) Lane(i int) string {
	if i < 0 || i > 9 {
		panic(fmt.Sprintf("testutil: lane %d of a slot: a slot has lanes 0 to 9", i))
	}
	return "e2e-" + s.id() + strconv.Itoa(i)
}

// Port is the slot's next unused port; a test asking for more than
// portsPerSlot fails.
func (s *Slot) Port(t testing.TB) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == portsPerSlot {
		t.Fatalf("test slot %d has only %d ports", s.n, portsPerSlot)
	}
	s.next++
	return s.port(s.next - 1)
}

// FreePort is a port no other test holds: the port of a slot of its own.
func FreePort(t testing.TB) int {
	t.Helper()
	return TakeSlot(t).Port(t)
}

// openLockFile opens (making it if need be) the lock file name in slotDir,
// which every test process on the machine shares.
func openLockFile(name string) (*os.File, error) {
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(slotDir, 0o1777)
	return os.OpenFile(filepath.Join(slotDir, name), os.O_CREATE|os.O_RDWR, 0o666)
}
