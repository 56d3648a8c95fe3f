package log

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Printer prints one line per step with its duration (a spinner on a
// terminal, plain lines otherwise, so CI logs stay readable) and is the
// Logger of everything the step runs: warnings and errors always, V(1)
// detail with -v.
type Printer struct {
	out     io.Writer
	verbose bool
	tty     bool

	mu      sync.Mutex
	step    string
	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

var _ Logger = (*Printer)(nil)

// NewPrinter writes to out (the command's stderr); a spinner is used only
// when out is a terminal and CI is not set.
func NewPrinter(out io.Writer, verbose bool) *Printer {
	s := &Printer{out: out, verbose: verbose}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" {
		s.tty = true
	}
	return s
}

// Start begins a step.
func (s *Printer) Start(step string) {
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

// spinnerFrameInterval is how often the spinner redraws its line: ten
// frames a second turn it smoothly and keep its seconds counter current,
// at a cost of one short terminal write each.
const spinnerFrameInterval = 100 * time.Millisecond

func (s *Printer) spin(step string, stop, done chan struct{}) {
	defer close(done)
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	t := time.NewTicker(spinnerFrameInterval)
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
func (s *Printer) End(err error) time.Duration {
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

// Warn prints " ! message", always.
func (s *Printer) Warn(message string) { s.line(" !", message) }

// Warnf is Warn with a format.
func (s *Printer) Warnf(format string, args ...any) { s.Warn(fmt.Sprintf(format, args...)) }

// Error prints " ✗ message", always: a failure the run went past.
func (s *Printer) Error(message string) { s.line(" ✗", message) }

// Errorf is Error with a format.
func (s *Printer) Errorf(format string, args ...any) { s.Error(fmt.Sprintf(format, args...)) }

// V returns the logger for lines of verbosity l: V(0) lines are always
// shown, V(1) and above only with -v, indented under the step they belong to.
func (s *Printer) V(l Level) InfoLogger { return info{s, l} }

type info struct {
	s *Printer
	l Level
}

func (i info) Enabled() bool { return i.l == 0 || i.s.verbose }

func (i info) Info(message string) {
	if i.Enabled() {
		i.s.line("  ", message)
	}
}

func (i info) Infof(format string, args ...any) {
	if i.Enabled() {
		i.Info(fmt.Sprintf(format, args...))
	}
}

func (s *Printer) line(mark, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s%s %s\n", s.clearSpinner(), mark, message)
}

// clearSpinner returns what erases the spinner's line before a line is
// printed while a step runs on a terminal. Call with s.mu held.
func (s *Printer) clearSpinner() string {
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
