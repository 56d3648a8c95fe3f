package vm

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// cpioEntry is one entry read back from a newc archive.
type cpioEntry struct {
	name         string
	mode         uint32
	rmaj, rmin   int
	data         string
	headerOffset int
}

// readCPIO parses a newc archive up to its trailer, checking the
// alignment the kernel expects (buffer-format.rst: header and data each
// start on a 4-byte boundary).
func readCPIO(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) int {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("header at %d field %d: %v", off, i, err)
		}
		return int(v)
	}
	for {
		if off%4 != 0 {
			t.Fatalf("header at %d is not 4-byte aligned", off)
		}
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		e := cpioEntry{mode: uint32(field(1)), rmaj: field(9), rmin: field(10), headerOffset: off}
		size, nameSize := field(6), field(11)
		name := b[off+110 : off+110+nameSize]
		if name[nameSize-1] != 0 {
			t.Fatalf("name at %d is not NUL-terminated", off)
		}
		e.name = string(name[:nameSize-1])
		data := (off + 110 + nameSize + 3) &^ 3
		e.data = string(b[data : data+size])
		off = (data + size + 3) &^ 3
		if e.name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func TestCPIOWriter(t *testing.T) {
	var buf bytes.Buffer
	w := newCPIO(&buf)
	w.file("/init", 0o755, []byte("#!init"))
	w.file("/a/b/c.txt", 0o644, []byte("12345")) // parents first, data padded
	w.file("/a/b/empty", 0o600, nil)
	w.symlink("/bin/sh", "busybox")
	w.charDev("/dev/console", 0o600, 5, 1)
	w.mkdirAll("/a/b") // written already: not again
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range readCPIO(t, buf.Bytes()) {
		got = append(got, fmt.Sprintf("%s %o %d,%d %q", e.name, e.mode, e.rmaj, e.rmin, e.data))
	}
	want := []string{
		`init 100755 0,0 "#!init"`,
		`a 40755 0,0 ""`,
		`a/b 40755 0,0 ""`,
		`a/b/c.txt 100644 0,0 "12345"`,
		`a/b/empty 100600 0,0 ""`,
		`bin 40755 0,0 ""`,
		`bin/sh 120777 0,0 "busybox"`,
		`dev 40755 0,0 ""`,
		`dev/console 20600 5,1 ""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("archive holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// GNU cpio, where installed, reads it as newc too.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-t", "--quiet", "-H", "newc")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -t: %v: %s", err, out)
		}
		var names []string
		for _, w := range want {
			names = append(names, strings.Fields(w)[0])
		}
		if got := strings.TrimSpace(string(out)); got != strings.Join(names, "\n") {
			t.Errorf("cpio -t lists\n%s\nwant\n%s", got, strings.Join(names, "\n"))
		}
	}
}
