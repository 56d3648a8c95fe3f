package reset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func TestLoadBaselineOfALaneWithoutOne(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	_, err := Load(l.Name, l.Dir())
	if !errors.Is(err, ErrNoBaseline) || !strings.Contains(err.Error(), "down --name "+l.Name) || !strings.Contains(err.Error(), "up") {
		t.Fatalf("%v", err)
	}
	if err := os.MkdirAll(l.Dir().Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &Baseline{Version: baselineVersion, Namespaces: []objectRef{ns("default", "u1").objectRef}}
	if err := Save(l.Dir(), b); err != nil {
		t.Fatal(err)
	}
	got, err := Load(l.Name, l.Dir())
	if err != nil || len(got.Namespaces) != 1 || got.Namespaces[0].UID != "u1" {
		t.Fatalf("%+v, %v", got, err)
	}
	if left, _ := os.ReadDir(l.Dir().Path()); len(left) != 1 || left[0].Name() != filepath.Base(l.Dir().Baseline()) {
		t.Errorf("the lane dir holds %v, want the baseline alone (no temporary file left behind)", left)
	}
}
