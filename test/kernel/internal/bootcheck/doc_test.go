package bootcheck

import (
	"os"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/docmap"
)

// The package doc's file map names every file of the package, and only
// those (docmap.Check). Not in the guest: it has no sources.
func TestDocFileMap(t *testing.T) {
	if os.Getenv("SRIOV_LANE_GUEST") == "1" {
		t.Skip("the guest has no source files")
	}
	docmap.Check(t, ".")
}
