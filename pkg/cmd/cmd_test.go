package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Main(args, IOStreams{In: strings.NewReader(""), Out: &out, Err: &out})
	return code, out.String()
}

func TestVersionNamesK3dLibrary(t *testing.T) {
	code, out := runCLI(t, "version", "-o", "json")
	var v VersionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Go == "" || v.Version == "" {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--no-such-flag"},
		{"plan", "--agents", "0"},
		{"plan", "-o", "xml"},
		{"version", "extra-arg"},
		{"plan", "--config", "/nonexistent/lane.yaml"},
	} {
		if code, out := runCLI(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
}

func TestPlanConfigOnlyIsDefaulted(t *testing.T) {
	code, out := runCLI(t, "plan", "--config-only", "--state-dir", t.TempDir(), "--agents", "3")
	if code != 0 || !strings.Contains(out, "agents: 3") || !strings.Contains(out, "vfsPerPF: 6") || !strings.Contains(out, "apiVersion: sriov-lane.io/v1alpha1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRoot(IOStreams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("command %s has no --help examples", c.Name())
		}
	}
}
