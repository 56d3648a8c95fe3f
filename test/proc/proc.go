// Package proc is the one supervisor of child processes in the tests and
// stand-ins: test/apiserver starts etcd and kube-apiserver with it, and the
// stand-in k3s (test/standin/k3s) every component of a node. It is built
// into the stand-in node image's /bin/k3s, so it imports only the standard
// library.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// tailBytes is how much of a log an exit error carries: enough for a Go
// panic's first goroutine or a component's last few klog lines, little
// enough to keep a test failure readable.
const tailBytes = 4000

// Spec says what to run and where its output goes.
type Spec struct {
	Name string
	Bin  string
	Args []string
	// LogPath is the file the output is appended to (its directory made
	// if missing); "" for none. Exit errors quote its tail.
	LogPath string
	// Echo also receives the output (the stand-in k3s's stderr, where
	// k3s's in-process components log); nil for none.
	Echo io.Writer
}

// Process is a started child whose exit is observed in the background, so
// a crash is reported at once instead of after some caller's timeout.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs s.Bin. The child gets its own process group: Stop then
// reaches what it forks (containerd's shims re-parent to PID 1 on purpose
// and are not in it), and a test's Ctrl-C does not race an orderly Stop.
// No Pdeathsig: it fires when the spawning OS thread exits, which Go does
// when any goroutine locked to a thread (netns code) ends, so the child
// would die at random.
func Start(s Spec) (*Process, error) {
	var outs []io.Writer
	var logFile *os.File
	if s.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(s.LogPath), 0o755); err != nil {
			return nil, fmt.Errorf("making the log directory of %s: %w", s.Name, err)
		}
		f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening %s log %s: %w", s.Name, s.LogPath, err)
		}
		logFile = f
		outs = append(outs, f)
	}
	if s.Echo != nil {
		outs = append(outs, s.Echo)
	}
	cmd := exec.Command(s.Bin, s.Args...)
	switch len(outs) {
	case 0:
	case 1:
		cmd.Stdout, cmd.Stderr = outs[0], outs[0]
	default:
		w := io.MultiWriter(outs...)
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("starting %s (%s): %w", s.Name, s.Bin, err)
	}
	p := &Process{Name: s.Name, LogPath: s.LogPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited is nil while the process runs, else why it ended (ExitError).
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return p.ExitError()
	default:
		return nil
	}
}

// ExitError says how the process ended, with the tail of its log. Call it
// once Done is closed.
func (p *Process) ExitError() error {
	msg := fmt.Sprintf("%s exited: %v", p.Name, p.err)
	if p.LogPath != "" {
		msg += "; log " + p.LogPath + ":\n" + Tail(p.LogPath, tailBytes)
	}
	return errors.New(msg)
}

// Stop asks with SIGTERM, then kills the group after grace. Safe on a nil
// or exited process.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Tail is the last max bytes of a log file, for error messages.
func Tail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// ErrNotReady is WaitReady's error when its timeout passed first.
var ErrNotReady = errors.New("not ready in time")

// WaitReady asks ready at once and then interval after each answer (as
// apimachinery's Poll functions and k3s's own waits do) until it answers
// true (nil), one of procs exits (its ExitError, with its log's tail), ctx
// ends (ctx.Err()) or timeout passes (ErrNotReady); a timeout of 0 waits
// as long as ctx. A child's exit wins over ctx and the timeout, as it is
// the cause worth reporting, and is noticed at the next probe, not after
// the caller's timeout. No probe starts once ctx or the timeout has
// ended. ready gets ctx, not a context cut at the timeout, so its last
// error says what failed rather than "deadline exceeded".
func WaitReady(ctx context.Context, procs []*Process, interval, timeout time.Duration, ready func(context.Context) bool) error {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return firstExit(procs, ctx.Err())
		case <-deadline:
			return firstExit(procs, ErrNotReady)
		case <-next.C:
		}
		if err := firstExit(procs, nil); err != nil {
			return err
		}
		// The timer and ctx may have fired while next did: neither
		// gets a probe past its end.
		select {
		case <-ctx.Done():
			return firstExit(procs, ctx.Err())
		case <-deadline:
			return firstExit(procs, ErrNotReady)
		default:
		}
		if ready(ctx) {
			return nil
		}
		next.Reset(interval)
	}
}

// firstExit is the exit of the first of procs that has ended, else err.
func firstExit(procs []*Process, err error) error {
	for _, p := range procs {
		if e := p.Exited(); e != nil {
			return e
		}
	}
	return err
}

// superviseGrace is how long Supervise gives each component to stop on
// SIGTERM before killing it: long enough for kubelet and containerd to
// finish an orderly shutdown on the loaded 2-core rig.
const superviseGrace = 10 * time.Second

// Supervise waits until ctx ends (nil) or one process exits or extra
// delivers (that error), then stops every process, last started first.
func Supervise(ctx context.Context, procs []*Process, extra <-chan error) error {
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(superviseGrace)
		}
	}()
	exits := make(chan error, len(procs))
	for _, p := range procs {
		go func() {
			<-p.done
			exits <- p.ExitError()
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-exits:
		return err
	case err := <-extra:
		return err
	}
}

// Kill kills and reaps a child a test started with os/exec itself (one it
// reads a pipe of, or whose PID it hands on), for its cleanup. The child's
// own exit status, "signal: killed" above all, is no error here; a child
// reaped already is none either, so a test may Kill it midway and again in
// its cleanup.
func Kill(cmd *exec.Cmd) error {
	if err := cmd.Process.Kill(); errors.Is(err, os.ErrProcessDone) {
		return nil
	} else if err != nil {
		return fmt.Errorf("killing %s (PID %d): %w", cmd.Path, cmd.Process.Pid, err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); err != nil && !errors.As(err, &exit) {
		return fmt.Errorf("reaping %s (PID %d): %w", cmd.Path, cmd.Process.Pid, err)
	}
	return nil
}
