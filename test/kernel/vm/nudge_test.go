package vm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The silence clock restarts whenever the console or the result stream
// grows, and only then.
func TestSilenceFollowsBothFiles(t *testing.T) {
	dir := t.TempDir()
	console, results := filepath.Join(dir, "console.log"), filepath.Join(dir, "results.jsonl")
	appendTo := func(p string) {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("line\n"); err != nil {
			t.Fatal(err)
		}
	}
	s := silence{files: []string{console, results}}
	t0 := time.Unix(1000, 0)
	if q := s.quietFor(t0); q != 0 {
		t.Fatalf("first look: quiet %s", q)
	}
	if q := s.quietFor(t0.Add(time.Minute)); q != time.Minute {
		t.Fatalf("nothing written for a minute: quiet %s", q)
	}
	appendTo(results)
	if q := s.quietFor(t0.Add(2 * time.Minute)); q != 0 {
		t.Fatalf("the result stream grew: quiet %s", q)
	}
	appendTo(console)
	if q := s.quietFor(t0.Add(3 * time.Minute)); q != 0 {
		t.Fatalf("the console grew: quiet %s", q)
	}
	if q := s.quietFor(t0.Add(5 * time.Minute)); q != 2*time.Minute {
		t.Fatalf("two silent minutes: quiet %s", q)
	}
}

// lapicTimer keeps the LVTT and Timer lines of QEMU's "info lapic", one
// register a line, name first (the lines as QEMU 10 printed them for a
// guest of TestBootFailures, spacing aside), and not the thermal LVTTHMR.
func TestLAPICTimerLines(t *testing.T) {
	dump := "dumping local APIC state for CPU 0\n\nLVT0\t 0x00010700 active-hi edge  masked                      ExtINT (vec 0)\n" +
		"LVTTHMR\t 0x00010000 active-hi edge  masked                      Fixed  (vec 0)\n" +
		"LVTT\t 0x000000ec active-hi edge                 one-shot         Fixed  (vec 236)\n" +
		"Timer\t DCR=0x3 (divide by 16) initial_count = 0 current_count = 0\nSPIV\t 0x000001ff APIC enabled, focus=off, spurious vec 255\n"
	want := "LVTT 0x000000ec active-hi edge one-shot Fixed (vec 236); Timer DCR=0x3 (divide by 16) initial_count = 0 current_count = 0"
	if got := lapicTimer(dump); got != want {
		t.Errorf("lapicTimer:\n got %q\nwant %q", got, want)
	}
	if got := lapicTimer("unknown command"); got != "unknown command" {
		t.Errorf("a dump without timer lines: %q", got)
	}
}
