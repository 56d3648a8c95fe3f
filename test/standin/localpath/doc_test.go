package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The package doc's file map names every file of the package, and only
// those. It is test/docmap.Check, copied: this module does not
// require the project's module, and importing docmap would add it to its
// graph for twenty lines.
func TestDocFileMap(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\s+- (\S+\.go):`).FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range files {
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
