package vfiouser

import (
	"testing"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// The package doc's file map names every file of the package, and only
// those (testutil.CheckDocFileMap).
func TestDocFileMap(t *testing.T) { testutil.CheckDocFileMap(t, ".") }
