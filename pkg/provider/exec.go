package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"k8s.io/apimachinery/pkg/util/wait"
)

// execResult is what a command run in a container left behind.
type execResult struct {
	ExitCode       int
	Stdout, Stderr string
}

// exec runs argv in the container through the Docker API (no shell), feeding
// stdin when given, and returns its exit code and output. A non-zero exit is
// not an error here; callers decide.
func (p *Provider) exec(ctx context.Context, containerID string, argv []string, stdin io.Reader) (execResult, error) {
	created, err := p.docker.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		// Node containers are privileged; the exec needs the same
		// capabilities (mount, chmod on device nodes).
		Privileged:   true,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return execResult{}, fmt.Errorf("creating exec %q: %w", argv, err)
	}
	att, err := p.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return execResult{}, fmt.Errorf("attaching to exec %q: %w", argv, err)
	}
	defer att.Close()
	stdinErr := make(chan error, 1)
	if stdin != nil {
		go func() {
			_, err := io.Copy(att.Conn, stdin)
			if cerr := att.CloseWrite(); err == nil {
				err = cerr
			}
			stdinErr <- err
		}()
	} else {
		stdinErr <- nil
	}
	var out, errb bytes.Buffer
	// Stop reading when ctx ends: the hijacked connection ignores ctx.
	stop := context.AfterFunc(ctx, func() { att.Close() })
	_, copyErr := stdcopy.StdCopy(&out, &errb, att.Reader)
	stop()
	if err := ctx.Err(); err != nil {
		return execResult{}, fmt.Errorf("exec %q: %w", argv, err)
	}
	if copyErr != nil {
		return execResult{}, fmt.Errorf("reading output of exec %q: %w", argv, copyErr)
	}
	// The output stream ends when the process exits; the daemon may take a
	// moment more to record the exit code.
	var ins container.ExecInspect
	var inspectErr error
	err = wait.PollUntilContextCancel(ctx, execExitPollInterval, true, func(ctx context.Context) (bool, error) {
		ins, inspectErr = p.docker.ContainerExecInspect(ctx, created.ID)
		return inspectErr != nil || !ins.Running, nil
	})
	switch {
	case inspectErr != nil:
		return execResult{}, fmt.Errorf("inspecting exec %q: %w", argv, inspectErr)
	case err != nil:
		return execResult{}, fmt.Errorf("exec %q: %w", argv, err)
	}
	res := execResult{ExitCode: ins.ExitCode, Stdout: out.String(), Stderr: errb.String()}
	if res.ExitCode != 0 {
		// A command that failed before reading all its input breaks the
		// stdin pipe; its own exit and stderr say why, the broken pipe does
		// not. The deferred Close ends the stdin copy.
		return res, nil
	}
	if err := <-stdinErr; err != nil {
		return execResult{}, fmt.Errorf("writing stdin of exec %q: %w", argv, err)
	}
	return res, nil
}

// execExitPollInterval is how often exec asks the daemon for the exit code
// after the output ended: it records it within milliseconds.
const execExitPollInterval = 20 * time.Millisecond

// run is exec that fails on a non-zero exit, quoting the command's stderr.
func (p *Provider) run(ctx context.Context, containerID string, argv []string, stdin io.Reader) error {
	r, err := p.exec(ctx, containerID, argv, stdin)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := strings.TrimSpace(r.Stderr)
		if msg == "" {
			msg = strings.TrimSpace(r.Stdout)
		}
		return fmt.Errorf("%q exited with %d: %s", argv, r.ExitCode, msg)
	}
	return nil
}
