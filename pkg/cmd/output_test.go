package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// Results go to stdout and nothing else does: a warning (here, about a
// saved config down cannot read) goes to stderr, so a caller reading
// stdout gets the result alone.
func TestResultsOnStdoutWarningsOnStderr(t *testing.T) {
	state := t.TempDir()
	dir := statedir.Dir(state).Lane("x")
	if err := os.MkdirAll(dir.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.SavedConfig(), []byte("not: [a lane"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main([]string{"down", "--name", "x", "--state-dir", state}, IOStreams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if got := stdout.String(); got != "lane x: nothing to do\n" {
		t.Errorf("stdout holds %q, want the result alone", got)
	}
	if got := stderr.String(); !strings.Contains(got, "ignoring unreadable saved config "+filepath.Join(dir.Path(), "lane.yaml")) {
		t.Errorf("stderr lacks the warning about the saved config:\n%s", got)
	}
}
