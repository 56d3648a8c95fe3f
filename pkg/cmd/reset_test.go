package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResetUsageExits2(t *testing.T) {
	for _, args := range [][]string{
		{"reset", "--timeout", "0s"},
		{"reset", "--timeout", "soon"},
		{"reset", "extra-arg"},
		{"reset", "--all", "--name", "lane2", "--state-dir", t.TempDir()},
	} {
		if code, out := runCLI(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
}

// A lane that does not exist, and one up brought up before baselines, fail
// with what to do, before anything is touched (no Docker, no API).
func TestResetNeedsALaneWithABaseline(t *testing.T) {
	state := t.TempDir()
	code, out := runCLI(t, "reset", "--name", "nolane", "--state-dir", state)
	if code != ExitFailure || !strings.Contains(out, "lane nolane does not exist") {
		t.Errorf("missing lane: exit %d:\n%s", code, out)
	}
	dir := filepath.Join(state, "lanes", "old")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "journal.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runCLI(t, "reset", "--name", "old", "--state-dir", state)
	if code != ExitFailure || !strings.Contains(out, "lane old has no baseline") ||
		!strings.Contains(out, "sriov-lane down --name old") || !strings.Contains(out, "sriov-lane up") {
		t.Errorf("lane without a baseline: exit %d:\n%s", code, out)
	}
}
