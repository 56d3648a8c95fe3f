package lane

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// A file up writes outside the lane dir (the user's kubeconfig, kubevirtci's
// files) goes back as it was, content and permissions, or goes if up made
// it; its backup is no more readable than the file itself.
func TestOutsideFileGoesBackAsItWas(t *testing.T) {
	l := config.Default()
	tmp := t.TempDir()
	l.StateDir = filepath.Join(tmp, "state")
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := &Session{Lane: l, Journal: j, Log: log.NewPrinter(io.Discard, false)}

	users, made := filepath.Join(tmp, "config"), filepath.Join(tmp, ".kubectl")
	if err := os.WriteFile(users, []byte("users\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{users, made} {
		if err := writeOutsideFile(c, p, func(p string) error { return os.WriteFile(p, []byte("lane's\n"), 0o600) }); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(l.Dir().Backup(users)); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("backup of %s: %v, mode %v, want 0640 as the file's", users, err, fi)
	}
	if err := journal.Reverse(context.Background(), j, laneUndoers(), journal.ReverseOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(users)
	fi, serr := os.Stat(users)
	if err != nil || serr != nil || string(b) != "users\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("%s after the undo: %q %v, mode %v; want its content and mode 0640 back", users, b, err, fi)
	}
	if _, err := os.Stat(made); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s, which up made, is left: %v", made, err)
	}
	if _, err := os.Stat(l.Dir().Backup(users)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the backup is left: %v", err)
	}
}
