package lane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// runnerLane is a session on a lane whose state dir is t's, its journal
// open, its undo of opFake counted in undone: what the runner needs and
// nothing of the host.
type runnerLane struct {
	c      *Session
	out    *bytes.Buffer
	undone []string
	// undoErr, when set, is what the undo of every entry returns.
	undoErr error
	// undoCtxErr is the ctx.Err() each undo saw.
	undoCtxErr []error
}

const opFake = "fake"

func newRunnerLane(t *testing.T) *runnerLane {
	t.Helper()
	l := config.Default()
	l.StateDir = t.TempDir()
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	r := &runnerLane{out: &bytes.Buffer{}}
	r.c = &Session{Lane: l, Journal: j, Log: log.NewPrinter(r.out, false)}
	r.c.undoers = journal.Undoers{opFake: journal.UndoRecord(func(ctx context.Context, what string) (string, error) {
		r.undoCtxErr = append(r.undoCtxErr, ctx.Err())
		if r.undoErr != nil {
			return "", r.undoErr
		}
		r.undone = append(r.undone, what)
		return "", nil
	})}
	return r
}

// change is a step that journals one change, as up's steps do, before and
// after making it.
func change(name string) Step {
	return Step{Name: name, Run: func(_ context.Context, c *Session) error {
		e, err := c.Journal.Begin(opFake, name)
		if err != nil {
			return err
		}
		return c.Journal.Done(e)
	}}
}

func failing(name string, err error) Step {
	return Step{Name: name, Run: func(context.Context, *Session) error { return err }}
}

// lines are the step lines the runner printed, without their durations.
func (r *runnerLane) lines() []string {
	var out []string
	for _, l := range strings.Split(strings.Trim(r.out.String(), "\n"), "\n") {
		if i := strings.LastIndex(l, " ("); i > 0 && strings.HasSuffix(l, ")") {
			l = l[:i]
		}
		out = append(out, l)
	}
	return out
}

func (r *runnerLane) wantLines(t *testing.T, want ...string) {
	t.Helper()
	if got := r.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Up's rollback: a failed step undoes every change before it, newest
// first, then the lane's journal and directory go; the steps after it
// never run.
func TestRunUndoesOnFailure(t *testing.T) {
	r := newRunnerLane(t)
	boom := errors.New("boom")
	ran := false
	_, err := r.c.run(context.Background(), undo, change("a"), change("b"), failing("c", boom),
		Step{Name: "d", Run: func(context.Context, *Session) error { ran = true; return nil }})
	if !errors.Is(err, boom) || err.Error() != "c: boom" {
		t.Fatalf("err = %v, want the step's name and its error", err)
	}
	if ran {
		t.Error("a step after the failed one ran")
	}
	if strings.Join(r.undone, ",") != "b,a" {
		t.Errorf("undone %v, want newest first: [b a]", r.undone)
	}
	if r.c.Lane.Dir().HasJournal() {
		t.Error("the journal is left after a whole undo")
	}
	r.wantLines(t, " ✓ a", " ✓ b", " ✗ c", " ✓ undo")
}

// --retain: a failed up keeps all it made, and says how to remove it.
func TestRunRetainKeepsWhatFailed(t *testing.T) {
	r := newRunnerLane(t)
	r.c.Retain = true
	_, err := r.c.run(context.Background(), undo, change("a"), failing("b", errors.New("boom")))
	if err == nil || !strings.Contains(err.Error(), "retained as requested (--retain)") || !strings.Contains(err.Error(), "sriov-lane down --name sriov") {
		t.Fatalf("err = %v", err)
	}
	if len(r.undone) != 0 {
		t.Errorf("undid %v with --retain", r.undone)
	}
	if n := len(r.c.Journal.Pending()); n != 1 {
		t.Errorf("%d entries pending, want the one change kept for down", n)
	}
	r.wantLines(t, " ✓ a", " ✗ b")
}

// Ctrl-C during a step: the step that returned fine after it still counts
// as failed (what it did may be half done), and the undo runs to its end
// on a context the cancellation does not reach.
func TestRunInterruptedUndoesOnALiveContext(t *testing.T) {
	r := newRunnerLane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupt := Step{Name: "b", Run: func(context.Context, *Session) error { cancel(); return nil }}
	_, err := r.c.run(ctx, undo, change("a"), interrupt, change("c"))
	if !errors.Is(err, context.Canceled) || err.Error() != "b: context canceled" {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(r.undone, ",") != "a" {
		t.Errorf("undone %v, want [a]", r.undone)
	}
	for _, e := range r.undoCtxErr {
		if e != nil {
			t.Errorf("an undo ran on a cancelled context: %v", e)
		}
	}
	r.wantLines(t, " ✓ a", " ✗ b", " ✓ undo")
}

// A step that fails of its own while ctx is cancelled says it was
// interrupted: the user pressed Ctrl-C, the step did not break.
func TestRunInterruptedStepSaysSo(t *testing.T) {
	r := newRunnerLane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	step := Step{Name: "wait", Run: func(context.Context, *Session) error { cancel(); return errors.New("no Node yet") }}
	_, err := r.c.run(ctx, undo, step)
	if err == nil || err.Error() != "wait: interrupted: no Node yet" {
		t.Fatalf("err = %v", err)
	}
}

// Cancelled before a step: it never starts, and the error names it.
func TestRunInterruptedBefore(t *testing.T) {
	r := newRunnerLane(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.c.run(ctx, stop, change("a"))
	if err == nil || err.Error() != "interrupted before a: context canceled" {
		t.Fatalf("err = %v", err)
	}
	if r.out.Len() != 0 {
		t.Errorf("printed %q for a step that never started", r.out)
	}
}

// stop (repair, reset, down): the error as the step gave it, and the
// journal keeps everything for down or the command run again.
func TestRunStopKeepsTheJournal(t *testing.T) {
	for _, tc := range []struct {
		fail onFailure
		want string
	}{{stop, "boom"}, {stopNamed, "b: boom"}} {
		r := newRunnerLane(t)
		_, err := r.c.run(context.Background(), tc.fail, change("a"), failing("b", errors.New("boom")))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: err = %v, want %q", tc.fail, err, tc.want)
		}
		if len(r.undone) != 0 || len(r.c.Journal.Pending()) != 1 {
			t.Errorf("%v: undone %v, %d pending: stop must leave the journal as it is", tc.fail, r.undone, len(r.c.Journal.Pending()))
		}
	}
}

// GoOn turns a failure into a warning and the run goes on (down's hooks);
// If leaves a step out, without a line, when what came before says so.
func TestRunGoOnAndIf(t *testing.T) {
	r := newRunnerLane(t)
	skipped := Step{Name: "skipped", If: func(*Session) bool { return false }, Run: func(context.Context, *Session) error {
		t.Error("a step whose If says no ran")
		return nil
	}}
	soft := failing("hooks", errors.New("hook exited 1"))
	soft.GoOn = "tearing down anyway"
	timings, err := r.c.run(context.Background(), stop, skipped, soft, change("a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(timings) != 2 {
		t.Errorf("timings %v, want hooks and a", timings)
	}
	r.wantLines(t, " ✗ hooks", " ! hook exited 1; tearing down anyway", " ✓ a")
}

// An undo that fails keeps the journal and says how to finish.
func TestRunUndoFailsToo(t *testing.T) {
	r := newRunnerLane(t)
	r.undoErr = errors.New("PF busy")
	_, err := r.c.run(context.Background(), undo, change("a"), failing("b", errors.New("boom")))
	for _, want := range []string{"b: boom", "undo failed too", "PF busy", r.c.Journal.Path(), "sriov-lane down --name sriov"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, lacks %q", err, want)
		}
	}
	if !r.c.Lane.Dir().HasJournal() || len(r.c.Journal.Pending()) != 1 {
		t.Error("a failed undo must leave its entry in the journal for down")
	}
	if got := r.lines(); len(got) < 2 || got[len(got)-1] != " ✗ undo" {
		t.Errorf("lines %q, want the undo's own ✗ last", got)
	}
}

func (f onFailure) String() string { return fmt.Sprintf("onFailure(%d)", int(f)) }
