package docexample

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"sriov-lane up", []string{"sriov-lane", "up"}},
		{"cluster-up/ssh.sh node02 'ls /sys/class/net'", []string{"cluster-up/ssh.sh", "node02", "ls /sys/class/net"}},
		{`a "b c"d ''`, []string{"a", "b cd", ""}},
		{"  x\ty  ", []string{"x", "y"}},
	} {
		if got := Split(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A page's shell blocks give one example a command, with what the block's
// comment lines and the command's own comment say; other blocks give none.
func TestReadPage(t *testing.T) {
	root := t.TempDir()
	page := "docs/p.md"
	text := "# P\n\n```yaml\nkind: Lane # --name\n```\n\n```sh\n# as root, on an SR-IOV host\n" +
		"A=1 B='x y' sriov-lane up --agents 2   # a '#' in quotes: '#'\n" +
		"qemu -a \\\n  -b # continued\n\n$ sriov-lane down\n```\n\n```\nmake test # no info string is a shell block\n```\n"
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, page), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readPage(root, page)
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{File: page, Line: 9, Command: "A=1 B='x y' sriov-lane up --agents 2", Comment: "as root, on an SR-IOV host a '#' in quotes: '#'",
			Env: []string{"A=1", "B=x y"}, Args: []string{"sriov-lane", "up", "--agents", "2"}},
		{File: page, Line: 10, Command: "qemu -a -b", Comment: "as root, on an SR-IOV host continued", Args: []string{"qemu", "-a", "-b"}},
		{File: page, Line: 13, Command: "sriov-lane down", Comment: "as root, on an SR-IOV host", Args: []string{"sriov-lane", "down"}},
		{File: page, Line: 17, Command: "make test", Comment: "no info string is a shell block", Args: []string{"make", "test"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readPage:\n got %#v\nwant %#v", got, want)
	}
	if err := os.WriteFile(filepath.Join(root, page), []byte("```sh\nx \\\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPage(root, page); err == nil {
		t.Error("an unclosed block read without an error")
	}
}
