package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one component the supervisor started, as k3s starts (in-process)
// its kubelet, containerd and control-plane components. Any of them
// exiting ends the supervisor with the reason, and so restarts the node
// container (k3d runs nodes with restart=unless-stopped), as k3s does.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc runs bin with args; its output goes to logPath, or to the
// supervisor's stderr (the container log k3d reads) when logPath is "".
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	var out io.Writer = os.Stderr
	var closer io.Closer
	if logPath != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening %s log: %w", name, err)
		}
		out, closer = f, f
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group so stop reaches what the component forks (shims
	// re-parent to PID 1 on purpose and are not in it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf("Running %s %s", name, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		if closer != nil {
			closer.Close()
		}
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if closer != nil {
			closer.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() error {
	select {
	case <-p.done:
		return p.exitError()
	default:
		return nil
	}
}

func (p *proc) exitError() error {
	msg := fmt.Sprintf("%s exited: %v", p.name, p.err)
	if p.log != "" {
		msg += "; log " + p.log + ":\n" + tail(p.log, 3000)
	}
	return fmt.Errorf("%s", msg)
}

func (p *proc) stop(grace time.Duration) {
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

func tail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// supervise waits until ctx ends (then stops every component, last started
// first) or one component exits (an error).
func supervise(ctx context.Context, procs []*proc, extra <-chan error) error {
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(10 * time.Second)
		}
	}()
	cases := make(chan error, len(procs))
	for _, p := range procs {
		go func() {
			<-p.done
			cases <- p.exitError()
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-cases:
		return err
	case err := <-extra:
		return err
	}
}
