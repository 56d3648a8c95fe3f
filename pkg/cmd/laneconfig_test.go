package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config file of two lanes is bad input: exit 2, naming the file and the
// document, before anything on the host is touched (the state dir is not
// even created).
func TestMultiDocumentConfigExits2(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	p := filepath.Join(dir, "lane.yaml")
	body := "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nname: a\nstateDir: " + state + "\n---\napiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nname: b\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"up", "check", "plan"} {
		code, out := runCLI(t, cmd, "--config", p)
		if code != ExitUsage || !strings.Contains(out, "lane.yaml: document 2 (line 6): a lane config holds one document; found 2") {
			t.Errorf("%s --config %s: exit %d, want 2 naming the document:\n%s", cmd, p, code, out)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state dir %s exists after refused input: %v", state, err)
	}
}
