package journal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

func TestBeginDoneReverseFromFreshOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lane", "journal.jsonl")
	j, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := j.Begin("t.a", map[string]string{"x": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Done(a); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Begin("t.b", map[string]int{"n": 2}); err != nil { // never marked done: a crash mid-change
		t.Fatal(err)
	}
	j.Close()

	j2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	var order []string
	var sawDone []bool
	u := Undoers{
		"t.a": func(_ context.Context, e *Entry) (string, error) {
			var d map[string]string
			if err := e.Decode(&d); err != nil || d["x"] != "1" {
				t.Errorf("data lost: %v %v", d, err)
			}
			order, sawDone = append(order, e.Op), append(sawDone, e.Done)
			return "", nil
		},
		"t.b": func(_ context.Context, e *Entry) (string, error) {
			order, sawDone = append(order, e.Op), append(sawDone, e.Done)
			return "was never done", nil
		},
	}
	if err := Reverse(context.Background(), j2, u, ReverseOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "t.b,t.a" || sawDone[0] || !sawDone[1] {
		t.Fatalf("order %v done %v", order, sawDone)
	}
	if len(j2.Pending()) != 0 {
		t.Fatal("entries still pending")
	}
	// A second Reverse has nothing to do.
	if err := Reverse(context.Background(), j2, Undoers{}, ReverseOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := j2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("journal not removed")
	}
}

func TestReverseStopsAtFailureAndResumes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	j := open(t, p)
	defer j.Close()
	begin(t, j, "t.cluster")
	begin(t, j, "t.pf")
	fail := true
	var clusterUndone bool
	u := Undoers{
		"t.pf": func(context.Context, *Entry) (string, error) {
			if fail {
				return "", errors.New("PF busy")
			}
			return "", nil
		},
		"t.cluster": func(context.Context, *Entry) (string, error) { clusterUndone = true; return "", nil },
	}
	if err := Reverse(context.Background(), j, u, ReverseOptions{}); err == nil || !strings.Contains(err.Error(), "PF busy") {
		t.Fatalf("want failure, got %v", err)
	}
	if clusterUndone {
		t.Fatal("cluster torn down although the PF did not come back")
	}
	fail = false
	if err := Reverse(context.Background(), j, u, ReverseOptions{}); err != nil || !clusterUndone {
		t.Fatalf("resume: %v %v", err, clusterUndone)
	}
}

func TestUnknownOpIsAnError(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "journal.jsonl"))
	defer j.Close()
	begin(t, j, "future.op")
	if err := Reverse(context.Background(), j, Undoers{}, ReverseOptions{}); err == nil || !strings.Contains(err.Error(), "future.op") {
		t.Fatalf("got %v", err)
	}
}

func TestTornLastLineIsDropped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	j := open(t, p)
	begin(t, j, "t.a")
	j.Close()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":2,"phase":"inte`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	j2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(j2.Pending()); n != 1 {
		t.Fatalf("pending = %d", n)
	}
	// Appending after a torn tail must leave a journal that still parses.
	if _, err := j2.Begin("t.b", nil); err != nil {
		t.Fatal(err)
	}
	j2.Close()
	j3, err := Open(p)
	if err != nil {
		t.Fatalf("journal unreadable after appending past a torn line: %v", err)
	}
	defer j3.Close()
	if n := len(j3.Pending()); n != 2 {
		t.Fatalf("pending = %d, want 2", n)
	}
}

// TestLockHeldAcrossProcesses checks a second process cannot open a journal
// that a live one holds, and can once that one is gone (the lock dies with it).
// heldJournal keeps the child's journal of TestLockHeldAcrossProcesses
// reachable.
var heldJournal *Journal

func TestLockHeldAcrossProcesses(t *testing.T) {
	if os.Getenv("JOURNAL_HOLD") != "" {
		j, err := Open(os.Getenv("JOURNAL_HOLD"))
		if err != nil {
			os.Exit(3)
		}
		// Reachable for good: an unreachable journal's file is closed by
		// its finalizer at the next GC, and the lock goes with it (a cold,
		// loaded make test saw the parent get the lock).
		heldJournal = j
		os.Stdout.WriteString("held\n")
		select {}
	}
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHeldAcrossProcesses$")
	cmd.Env = append(os.Environ(), "JOURNAL_HOLD="+p)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.Kill(cmd); err != nil {
			t.Log(err)
		}
	})
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child did not take the lock: %q %v", buf, err)
	}
	if _, err := Open(p); !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
	if err := proc.Kill(cmd); err != nil {
		t.Fatal(err)
	}
	j, err := Open(p)
	if err != nil {
		t.Fatalf("lock survived its process: %v", err)
	}
	j.Close()
}

// Only undoes the entries it accepts, newest first, and leaves the others
// pending for a later Reverse.
func TestReverseOnly(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, op := range []string{"t.keep", "t.undo", "t.keep", "t.undo"} {
		if err := j.Done(begin(t, j, op)); err != nil {
			t.Fatal(err)
		}
	}
	var order []int
	u := Undoers{
		"t.undo": func(_ context.Context, e *Entry) (string, error) { order = append(order, e.Seq); return "", nil },
		"t.keep": func(_ context.Context, e *Entry) (string, error) { t.Errorf("entry %d undone", e.Seq); return "", nil },
	}
	if err := Reverse(context.Background(), j, u, ReverseOptions{Only: func(e *Entry) bool { return e.Op == "t.undo" }}); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] < order[1] {
		t.Fatalf("undone %v, want the two t.undo entries newest first", order)
	}
	var left []string
	for _, e := range j.Pending() {
		left = append(left, e.Op)
	}
	if strings.Join(left, ",") != "t.keep,t.keep" {
		t.Fatalf("pending after Only: %v", left)
	}
}

// open opens the journal at p, failing t if it cannot.
func open(t *testing.T, p string) *Journal {
	t.Helper()
	j, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// begin records op with no data, failing t if it cannot.
func begin(t *testing.T, j *Journal, op string) *Entry {
	t.Helper()
	e, err := j.Begin(op, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
