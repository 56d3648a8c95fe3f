package lane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// upJournal is what up journals, in up's order (steps.go): every host
// change its steps make, by the operations' own names.
var upJournal = []string{
	sriov.OpLease, OpHostSysctls, provider.OpCluster, provider.OpRegistry, OpFile,
	sriov.OpPin, sriov.OpRename, sriov.OpMove, sriov.OpAutoprobe, sriov.OpNumVFs, sriov.OpBind,
}

// fakeHost is what down acts on, as a test sees it: which undos ran, in
// order, and when the agents were stopped.
type fakeHost struct {
	Cluster // nil: any call but StopAgents is a test failure (a panic)
	events  []string
	// fail, when set, is the operation whose undo fails.
	fail string
}

func (h *fakeHost) StopAgents(context.Context, string) error {
	h.events = append(h.events, "stop agents")
	return nil
}

func (h *fakeHost) undoers() journal.Undoers {
	u := journal.Undoers{}
	for _, op := range upJournal {
		u[op] = func(_ context.Context, e *journal.Entry) (string, error) {
			if op == h.fail {
				return "", fmt.Errorf("%s is busy", op)
			}
			h.events = append(h.events, fmt.Sprintf("undo %s %d", op, e.Seq))
			return "", nil
		}
	}
	return u
}

// writeUpJournal writes up's whole journal for l, each change begun and
// done, and returns its records, one a line.
func writeUpJournal(t *testing.T, l *config.Lane) []string {
	t.Helper()
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range upJournal {
		e, err := j.Begin(op, map[string]string{"op": op})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Done(e); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	b, err := os.ReadFile(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n")+"\n", "\n")[:2*len(upJournal)]
}

// openFake opens l's journal as down does, on the fake host.
func openFake(t *testing.T, l *config.Lane, h *fakeHost, out *bytes.Buffer) *Session {
	t.Helper()
	j, err := journal.Open(l.Dir().Journal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &Session{Lane: l, Journal: j, Log: log.NewPrinter(out, false), Provider: h, undoers: h.undoers(), Out: out}
}

// An up killed after any record of its journal: down undoes every change
// begun by then, done or only intended, newest first, stops the agents
// first when a netns was pinned, and leaves neither journal nor lane
// directory.
func TestDownAfterAKillAtEveryJournalRecord(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	records := writeUpJournal(t, l)
	for k := 0; k <= len(records); k++ {
		t.Run(fmt.Sprintf("after %d records", k), func(t *testing.T) {
			l := config.Default()
			l.StateDir = t.TempDir()
			if err := os.MkdirAll(l.Dir().Path(), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(l.Dir().Journal(), []byte(strings.Join(records[:k], "")), 0o600); err != nil {
				t.Fatal(err)
			}
			h := &fakeHost{}
			var out bytes.Buffer
			if _, err := openFake(t, l, h, &out).down(context.Background(), false); err != nil {
				t.Fatalf("down: %v\n%s", err, out.String())
			}
			// Records 2i and 2i+1 are the intent and the done of upJournal[i].
			begun := (k + 1) / 2
			var want []string
			if slices.Contains(upJournal[:begun], sriov.OpPin) {
				want = append(want, "stop agents")
			}
			for i := begun - 1; i >= 0; i-- {
				// Each record takes a sequence number: the intent of upJournal[i] is 2i+1.
				want = append(want, fmt.Sprintf("undo %s %d", upJournal[i], 2*i+1))
			}
			if !slices.Equal(h.events, want) {
				t.Errorf("down did\n  %s\nwant\n  %s", strings.Join(h.events, "\n  "), strings.Join(want, "\n  "))
			}
			if _, err := os.Stat(l.Dir().Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the lane directory is left after down: %v", err)
			}
		})
	}
}

// A change whose undo fails stops down there: nothing older is undone (a
// cluster deleted before its PF came back would strand the PF), the
// journal keeps the rest, and the error says to run down again. With
// --force down goes on past it, and still keeps the journal.
func TestDownStopsAtAFailedUndo(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%t", force), func(t *testing.T) {
			l := config.Default()
			l.StateDir = t.TempDir()
			writeUpJournal(t, l)
			h := &fakeHost{fail: sriov.OpMove}
			var out bytes.Buffer
			c := openFake(t, l, h, &out)
			_, err := c.down(context.Background(), force)
			if err == nil || !strings.Contains(err.Error(), "sriov.move is busy") || !strings.Contains(err.Error(), "run down again") {
				t.Fatalf("err = %v", err)
			}
			undoneCluster := slices.ContainsFunc(h.events, func(e string) bool { return strings.HasPrefix(e, "undo "+provider.OpCluster) })
			if undoneCluster != force {
				t.Errorf("cluster undone: %t, want %t (force %t): %v", undoneCluster, force, force, h.events)
			}
			if !l.Dir().HasJournal() || len(c.Journal.Pending()) == 0 {
				t.Error("a failed down must keep its journal")
			}
		})
	}
}

// A failing pre-down hook is a warning: the NICs go back all the same.
func TestDownGoesOnPastAFailingHook(t *testing.T) {
	l := config.Default()
	l.StateDir = t.TempDir()
	l.Hooks.PreDown = [][]string{{"false"}}
	writeUpJournal(t, l)
	h := &fakeHost{}
	var out bytes.Buffer
	if _, err := openFake(t, l, h, &out).down(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `pre-down hook "false": exit status 1; tearing down anyway`) {
		t.Errorf("no warning for the failed hook:\n%s", out.String())
	}
	if n := len(h.events); n != len(upJournal)+1 {
		t.Errorf("%d events, want the agents stopped and %d undos: %v", n, len(upJournal), h.events)
	}
}
