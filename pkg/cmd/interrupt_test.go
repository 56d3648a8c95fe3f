package cmd

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
)

// syncBuffer is a bytes.Buffer the signal goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The first Ctrl-C cancels the run's context and says what happens now;
// the second quits at once, with the exit code a shell gives a process
// ended by SIGINT, instead of waiting for the undo.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	var errOut syncBuffer
	exited := make(chan int, 1)
	g := &globals{}
	note := interruptedUpNote
	g.note.Store(&note)
	ctx, stop := onInterrupt(t.Context(), sigs, &errOut, g.interruptNote, func(code int) { exited <- code })
	defer stop()

	sigs <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(bound.Scaled(5 * time.Second)):
		t.Fatal("the first Ctrl-C did not cancel the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("the first Ctrl-C quit (exit %d); it must let the undo run", code)
	case <-time.After(bound.Scaled(50 * time.Millisecond)):
	}
	if got := errOut.String(); !strings.Contains(got, "interrupted: undoing what up made; press Ctrl-C again to quit now, 'sriov-lane down' finishes the job") {
		t.Errorf("the first Ctrl-C says %q", got)
	}

	sigs <- os.Interrupt
	select {
	case code := <-exited:
		if want := 128 + int(syscall.SIGINT); code != want {
			t.Errorf("exit %d, want %d", code, want)
		}
	case <-time.After(bound.Scaled(5 * time.Second)):
		t.Fatal("the second Ctrl-C did not quit")
	}
}

// A command that sets no note of its own says only that it stops.
func TestInterruptNoteDefault(t *testing.T) {
	if got := (&globals{}).interruptNote(); got != interruptedNote {
		t.Errorf("note %q, want %q", got, interruptedNote)
	}
}
