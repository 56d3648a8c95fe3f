// Package atomicfile replaces files whole: a reader, or the next process
// after a crash or a kill, finds the old content or the new one, never a
// torn file.
package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data and mode (umask does not apply). The
// directory must exist.
func Write(path string, data []byte, mode os.FileMode) error {
	return WriteFrom(path, bytes.NewReader(data), mode)
}

// WriteFrom is Write with the content read from r: it goes to a temporary
// file beside path, which is synced and then renamed over path. On failure
// the temporary file is removed and path is left as it was.
func WriteFrom(path string, r io.Reader, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return errors.Join(err, os.Remove(f.Name()))
	}
	return nil
}
