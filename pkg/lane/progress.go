package lane

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress prints one line per step with its duration: a spinner on a
// terminal, plain lines otherwise (CI logs stay readable), detail with -v.
type Progress struct {
	out     io.Writer
	verbose bool
	tty     bool

	mu      sync.Mutex
	step    string
	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

// NewProgress writes to out; a spinner is used only when out is a terminal
// and CI is not set.
func NewProgress(out io.Writer, verbose bool) *Progress {
	s := &Progress{out: out, verbose: verbose}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" {
		s.tty = true
	}
	return s
}

// Start begins a step.
func (s *Progress) Start(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step, s.started = step, time.Now()
	if !s.tty {
		if s.verbose {
			fmt.Fprintf(s.out, " • %s ...\n", step)
		}
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.spin(step, s.stop, s.done)
}

func (s *Progress) spin(step string, stop, done chan struct{}) {
	defer close(done)
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		s.mu.Lock()
		fmt.Fprintf(s.out, "\r %s %s (%.0fs)\x1b[K", frames[i%len(frames)], step, time.Since(s.started).Seconds())
		s.mu.Unlock()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// End finishes the current step with its result and duration.
func (s *Progress) End(err error) time.Duration {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Since(s.started)
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	prefix := ""
	if s.tty {
		prefix = "\r\x1b[K"
	}
	fmt.Fprintf(s.out, "%s %s %s (%s)\n", prefix, mark, s.step, round(d))
	return d
}

// Detailf prints detail lines under -v.
func (s *Progress) Detailf(format string, args ...any) {
	if !s.verbose {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s   %s\n", s.clearSpinner(), fmt.Sprintf(format, args...))
}

// Infof prints a line always (warnings, notes from undo).
func (s *Progress) Infof(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s ! %s\n", s.clearSpinner(), fmt.Sprintf(format, args...))
}

// clearSpinner returns what erases the spinner's line before a line is
// printed while a step runs on a terminal. Call with s.mu held.
func (s *Progress) clearSpinner() string {
	if s.tty && s.stop != nil {
		return "\r\x1b[K"
	}
	return ""
}

func round(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	default:
		return d.Round(10 * time.Millisecond)
	}
}
