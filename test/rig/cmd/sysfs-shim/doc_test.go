package main

import (
	"testing"

	"github.com/sriov-lane/sriov-lane/test/docmap"
)

// The package doc's file map names every file of the package, and only
// those (docmap.Check).
func TestDocFileMap(t *testing.T) { docmap.Check(t, ".") }
