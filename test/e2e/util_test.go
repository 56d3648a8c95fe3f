package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/rig"
)

func writeLane(t *testing.T, l *lane) {
	t.Helper()
	out, err := config.Marshal(l.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeRaw(t *testing.T, r *rig.Rig, name, body string) string {
	t.Helper()
	p := filepath.Join(r.Dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAsNobody runs the binary as uid 65534 with a copy of the lane config
// it can read.
func runAsNobody(t *testing.T, l *lane, args ...string) result {
	t.Helper()
	// Not under TMPDIR: tests point it at their own 0700 temp dir.
	dir, err := os.MkdirTemp("/tmp", "sriov-lane-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "lane.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == l.path {
			args[i] = p
		}
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return runCmd(t, cmd, fmt.Sprintf("as nobody: sriov-lane %v", args))
}
