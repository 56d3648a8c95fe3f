package testutil

import (
	"bytes"
	"os"
	"testing"
)

// Golden compares got with the golden file at path, after writing got to
// it when update is set (the package's own -update flag).
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -run %s -update in its package to write it): %v", t.Name(), err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if that is intended, run go test -run %s -update in its package and review the diff.\n--- got ---\n%s\n--- want ---\n%s", path, t.Name(), got, want)
	}
}
