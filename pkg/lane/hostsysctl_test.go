package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The first lane records the host's values; the host's last lane out
// restores those kubelet changed, leaves one something else changed and
// says so; a lane that vanished without down does not keep them changed.
func TestHostSysctlsRestoredByTheLastLane(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	h := sysctlHost{Root: root, StateDir: state}
	set := func(key, v string) {
		t.Helper()
		p := filepath.Join(root, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) string { v, _ := h.read(key); return v }
	set("vm/overcommit_memory", "0")
	set("kernel/panic", "0")
	set("kernel/panic_on_oops", "0")
	if err := h.hold("a"); err != nil {
		t.Fatal(err)
	}
	// The nodes' kubelets start and change them.
	set("vm/overcommit_memory", "1")
	set("kernel/panic", "10")
	set("kernel/panic_on_oops", "1")
	// A second lane must not record kubelet's values as the host's.
	if err := h.hold("b"); err != nil {
		t.Fatal(err)
	}
	alive := map[string]bool{"a": true, "b": true, "gone": false}
	isAlive := func(l string) bool { return alive[l] }
	note, err := h.release("a", isAlive)
	if err != nil || !strings.Contains(note, "lanes b are still up") || get("kernel/panic") != "10" {
		t.Fatalf("first lane down: %q %v, panic %s", note, err, get("kernel/panic"))
	}
	alive["a"] = false
	// Meanwhile an admin set panic_on_oops to something else.
	set("kernel/panic_on_oops", "5")
	note, err = h.release("b", isAlive)
	if err != nil {
		t.Fatal(err)
	}
	if get("vm/overcommit_memory") != "0" || get("kernel/panic") != "0" || get("kernel/panic_on_oops") != "5" {
		t.Fatalf("after the last lane: overcommit %s panic %s oops %s", get("vm/overcommit_memory"), get("kernel/panic"), get("kernel/panic_on_oops"))
	}
	for _, want := range []string{"restored", "vm.overcommit_memory=0", "kernel.panic=0", "kernel.panic_on_oops is 5", "changed by something else"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}
	if _, err := os.Stat(h.recordPath()); !os.IsNotExist(err) {
		t.Error("host record left after the last lane")
	}

	// A holder whose lane was removed by hand does not pin the values.
	if err := h.hold("c"); err != nil {
		t.Fatal(err)
	}
	if err := h.hold("gone"); err != nil {
		t.Fatal(err)
	}
	set("kernel/panic", "10")
	alive["c"] = true
	if note, err = h.release("c", isAlive); err != nil || get("kernel/panic") != "0" {
		t.Fatalf("a vanished lane kept the values: %q %v panic %s", note, err, get("kernel/panic"))
	}
}
