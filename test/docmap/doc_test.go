package docmap

import "testing"

// The package doc's file map names every file of the package, and only
// those (Check).
func TestDocFileMap(t *testing.T) { Check(t, ".") }
