// Package containerns opens the network namespace of a running Docker
// container. A container's PID, and with it its netns, changes when it
// restarts: Open reads the PID from Docker, opens the netns and reads the
// PID again, so that a restart in between never hands out the netns of
// whatever process got the old PID. Errors say what went wrong, not which
// container: the caller names it.
package containerns

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Inspector is the part of the Docker client this package needs.
type Inspector interface {
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
}

// ErrNotRunning says the container is stopped, or gone.
var ErrNotRunning = errors.New("not running")

// attempts bounds Open's retries while the container restarts under it.
const attempts = 3

// PID returns the container's init PID now, in the host's PID namespace.
// Its error wraps ErrNotRunning when the container is stopped or removed.
func PID(ctx context.Context, d Inspector, id string) (int, error) {
	if d == nil {
		return 0, errors.New("no Docker client to inspect it")
	}
	ins, err := d.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return 0, fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	if err != nil {
		return 0, fmt.Errorf("inspecting: %w", err)
	}
	if ins.State == nil || !ins.State.Running || ins.State.Pid == 0 {
		status := "unknown"
		if ins.State != nil {
			status = ins.State.Status
		}
		return 0, fmt.Errorf("%w (status %s)", ErrNotRunning, status)
	}
	return ins.State.Pid, nil
}

// Open opens the network namespace of the container's current PID; the
// caller closes it. Its error wraps ErrNotRunning when the container is
// stopped or removed.
func Open(ctx context.Context, d Inspector, id string) (netns.NsHandle, error) {
	for range attempts {
		pid, err := PID(ctx, d, id)
		if err != nil {
			return netns.None(), err
		}
		h, err := netns.GetFromPid(pid)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			continue // the process exited since: ask Docker again
		}
		if err != nil {
			return netns.None(), fmt.Errorf("opening the netns of pid %d: %w", pid, err)
		}
		again, err := PID(ctx, d, id)
		if err == nil && again == pid {
			return h, nil
		}
		h.Close()
		if err != nil {
			return netns.None(), err
		}
	}
	return netns.None(), errors.New("keeps restarting: its PID changed while its netns was opened")
}
