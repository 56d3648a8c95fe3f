package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed references are what make docs writes from the code now:
// a command, a flag, a config field or its doc comment changed without
// make docs fails here, naming the page.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	const root = "../.."
	pages, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what make docs writes (%v): run make docs", rel, err)
		}
	}
	old, err := stale(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		t.Errorf("%s documents no command: run make docs", p)
	}
	if len(pages) < 10 || pages[filepath.Join(commandsDir, "sriov-lane_up.md")] == nil {
		t.Errorf("the CLI reference lacks commands: %d pages", len(pages))
	}
}
