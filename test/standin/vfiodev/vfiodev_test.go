package vfiodev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func rdev(t *testing.T, p string) (uint32, uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & unix.S_IFMT, st.Rdev
}

// TestNode: a missing node is made, a good one kept, and a node that is
// something else (a regular file, as the rig's FUSE /dev/vfio serves) is
// replaced; a devNull that is no character device is refused.
func TestNode(t *testing.T) {
	testutil.RequireRoot(t) // mknod
	_, nullRdev := rdev(t, "/dev/null")
	dir := filepath.Join(t.TempDir(), "vfio")
	p, err := Node(dir, "/dev/null", "7")
	if err != nil {
		t.Fatal(err)
	}
	if typ, r := rdev(t, p); p != filepath.Join(dir, "7") || typ != unix.S_IFCHR || r != nullRdev {
		t.Fatalf("Node made %s: type %o rdev %d, want a char device with /dev/null's %d", p, typ, r, nullRdev)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("not a device"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Node(dir, "/dev/null", "7"); err != nil {
		t.Fatal(err)
	}
	if typ, _ := rdev(t, p); typ != unix.S_IFCHR {
		t.Fatalf("a regular file at %s was kept (type %o)", p, typ)
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("Node left %s.tmp behind (%v)", p, err)
	}
	notChar := filepath.Join(t.TempDir(), "null")
	if err := os.WriteFile(notChar, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Node(dir, notChar, "vfio"); err == nil || !strings.Contains(err.Error(), "is not a character device") {
		t.Fatalf("Node with a regular file for /dev/null: %v, want refused", err)
	}
}
