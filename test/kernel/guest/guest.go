package guest

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Env is set to "1" by the guest's init for every program it runs.
const Env = "SRIOV_LANE_GUEST"

// OutEnv names the directory whose files come back to the host.
const OutEnv = "SRIOV_LANE_GUEST_OUT"

// roleEnv tells a re-executed test binary which helper to be.
const roleEnv = "SRIOV_LANE_GUEST_ROLE"

const (
	roleAgent  = "agent"
	roleHolder = "vfio-holder"
)

// Require skips t outside the kernel tier's guest. That skip hides
// nothing: the host test that boots the guest runs these tests there and
// fails when they fail.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skip("runs only inside the kernel tier's QEMU guest (test/kernel)")
	}
}

// Main is the test binary's main: a re-executed child plays its role (an
// agent, a VFIO holder) and never runs the tests.
func Main(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case roleAgent:
		agentMain()
	case roleHolder:
		holderMain()
	}
	os.Exit(m.Run())
}

// Record logs v and leaves it as name.json in the out directory, so the
// host test can show what this kernel did.
func Record(t testing.TB, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("recording %s: %v", name, err)
	}
	t.Logf("%s: %s", name, b)
	dir := os.Getenv(OutEnv)
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Errorf("recording %s: %v", name, err)
	}
}

// child is this test binary re-executed in a role, alive until its stdin
// closes: an agent, a VFIO holder. Stop ends it.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// newChild makes the command of a child in role, with env added and attr
// for its process; the caller sets its output and starts it.
func newChild(t testing.TB, role string, attr *syscall.SysProcAttr, env ...string) child {
	t.Helper()
	cmd := exec.Command(self())
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	return child{cmd: cmd, stdin: stdin}
}

// Stop kills the child and waits for it, if it has not ended.
func (c child) Stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// self is this test binary, by its own name: re-executed by it, a helper's
// comm (what holder errors name) reads like the binary, not "exe".
func self() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "/proc/self/exe"
}

// WaitBound bounds the guest's waits for a child it started (a holder, an
// agent) to be ready, or for a driver's deferred work (a VF's netdev): the
// guest ran niced under TCG beside make test's lanes, where a child of
// this large test binary once took over 10 s to start (6.1, a warm make
// test on a slower machine). Only a failure waits this long.
const WaitBound = 60 * time.Second
