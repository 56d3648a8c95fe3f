package lane

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
)

// OpFile journals one file written outside the lane's state dir; its undo
// restores what it replaced (kept in the lane dir) or removes it.
const OpFile = "lane.file"

type fileRecord struct {
	Path   string `json:"path"`
	Backup string `json:"backup,omitempty"`
}

// writeOutsideFile writes path through write. Inside the lane dir nothing is
// journalled (down removes the dir); elsewhere the write is journalled first
// and an existing file (e.g. ~/.kube/config) is backed up for the undo.
func writeOutsideFile(c *Session, path string, write func(string) error) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if c.Lane.Dir().Holds(abs) {
		return write(abs)
	}
	rec := fileRecord{Path: abs}
	if _, err := os.Stat(abs); err == nil {
		rec.Backup = c.Lane.Dir().Backup(abs)
	}
	e, err := c.Journal.Begin(OpFile, rec)
	if err != nil {
		return err
	}
	if rec.Backup != "" {
		if err := copyKeepingMode(abs, rec.Backup); err != nil {
			return fmt.Errorf("backing up %s before replacing it: %w", abs, err)
		}
	}
	if err := write(abs); err != nil {
		return err
	}
	return c.Journal.Done(e)
}

// copyKeepingMode copies src to dst atomically with src's permissions: a
// user's kubeconfig holds credentials, and goes back as it was.
func copyKeepingMode(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.Write(dst, b, fi.Mode().Perm())
}
