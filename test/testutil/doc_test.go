package testutil

import "testing"

// The package doc's file map names every file of the package, and only
// those (CheckDocFileMap).
func TestDocFileMap(t *testing.T) { CheckDocFileMap(t, ".") }
