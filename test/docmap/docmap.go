package docmap

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docMapEntry is one line of a package doc's file map: "//   - name.go: what".
var docMapEntry = regexp.MustCompile(`(?m)^//\s+- (\S+\.go):`)

// Check fails t unless the file map in dir's doc.go names every
// non-test Go file of the package but doc.go itself, and only those: a file
// added, removed or renamed fails until the map says so.
func Check(t *testing.T, dir string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(dir, "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range docMapEntry.FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range files {
		f = filepath.Base(f)
		if !strings.HasSuffix(f, "_test.go") && f != "doc.go" {
			have = append(have, f)
		}
	}
	slices.Sort(listed)
	slices.Sort(have)
	if !slices.Equal(listed, have) {
		t.Errorf("doc.go's file map lists %v\nthe package has     %v", listed, have)
	}
}
