package vm

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format, the one the
// kernel unpacks as an initramfs (torvalds/linux
// Documentation/driver-api/early-userspace/buffer-format.rst@v6.1): per
// entry a 110-byte ASCII header ("070701", then 13 fields of 8 hex
// digits), the NUL-terminated name, padding to 4 bytes, the data, padding
// to 4 bytes; the archive ends with an entry named "TRAILER!!!".
// Uncompressed: the kernel takes that as well as compressed.
type cpioWriter struct {
	w    io.Writer
	ino  int
	dirs map[string]bool
	err  error
}

// File type bits of a cpio mode, as in stat(2).
const (
	cpioDir  = 0o040000
	cpioReg  = 0o100000
	cpioLink = 0o120000
	cpioChr  = 0o020000
)

func newCPIO(w io.Writer) *cpioWriter { return &cpioWriter{w: w, dirs: map[string]bool{}} }

func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor int, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+4)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	if _, err := c.w.Write(buf); err != nil {
		c.err = err
		return
	}
	if len(data) > 0 {
		if _, err := c.w.Write(data); err != nil {
			c.err = err
			return
		}
		if n := len(data) % 4; n != 0 {
			_, c.err = c.w.Write(make([]byte, 4-n))
		}
	}
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// mkdirAll writes the directories of p not written yet, parents first.
func (c *cpioWriter) mkdirAll(p string) {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" || c.dirs[p] {
		return
	}
	c.mkdirAll(path.Dir(p))
	c.dirs[p] = true
	c.entry(p, cpioDir|0o755, 0, 0, nil)
}

// file writes a regular file and its parent directories.
func (c *cpioWriter) file(p string, perm uint32, data []byte) {
	c.mkdirAll(path.Dir(p))
	c.entry(p, cpioReg|perm, 0, 0, data)
}

// symlink writes a symbolic link p -> target.
func (c *cpioWriter) symlink(p, target string) {
	c.mkdirAll(path.Dir(p))
	c.entry(p, cpioLink|0o777, 0, 0, []byte(target))
}

// charDev writes a character device node.
func (c *cpioWriter) charDev(p string, perm uint32, major, minor int) {
	c.mkdirAll(path.Dir(p))
	c.entry(p, cpioChr|perm, major, minor, nil)
}

// close writes the trailer.
func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	return c.err
}
