package proc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// WaitReady ends on the first of its four events, each with its own
// answer: ready, a child's exit (with its log), ctx's end, the timeout.
func TestWaitReadyEndsOnTheFirstEvent(t *testing.T) {
	sleeper := func(t *testing.T) *Process {
		t.Helper()
		p, err := Start(Spec{Name: "sleep", Bin: "/bin/sh", Args: []string{"-c", "sleep 60"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(time.Second) })
		return p
	}

	t.Run("ready on the third probe", func(t *testing.T) {
		calls := 0
		err := WaitReady(t.Context(), []*Process{sleeper(t)}, time.Millisecond, time.Minute, func(context.Context) bool {
			calls++
			return calls == 3
		})
		if err != nil || calls != 3 {
			t.Fatalf("err %v after %d probes, want nil after 3", err, calls)
		}
	})

	t.Run("a child exits", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "child.log")
		p, err := Start(Spec{Name: "child", Bin: "/bin/sh", Args: []string{"-c", "echo broken config; exit 3"}, LogPath: log})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		start := time.Now()
		err = WaitReady(t.Context(), []*Process{sleeper(t), p}, time.Millisecond, time.Minute, func(context.Context) bool { return false })
		if err == nil || !strings.Contains(err.Error(), "child exited") || !strings.Contains(err.Error(), "broken config") {
			t.Fatalf("err %v, want the child's exit with its log", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("took %s: an exit must end the wait at once, not at the timeout", d)
		}
	})

	t.Run("ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		err := WaitReady(ctx, nil, time.Millisecond, time.Minute, func(context.Context) bool {
			cancel()
			return false
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})

	t.Run("a child's exit wins over ctx's end", func(t *testing.T) {
		p, err := Start(Spec{Name: "child", Bin: "/bin/sh", Args: []string{"-c", "exit 3"}})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err = WaitReady(ctx, []*Process{p}, time.Millisecond, time.Minute, func(context.Context) bool { return false })
		if err == nil || !strings.Contains(err.Error(), "child exited") {
			t.Fatalf("err %v, want the child's exit", err)
		}
	})

	t.Run("no probe once the timeout has passed", func(t *testing.T) {
		probes := 0
		err := WaitReady(t.Context(), nil, time.Millisecond, 20*time.Millisecond, func(context.Context) bool {
			probes++
			time.Sleep(100 * time.Millisecond) // past the timeout: a second probe could answer true
			return probes > 1
		})
		if !errors.Is(err, ErrNotReady) || probes != 1 {
			t.Fatalf("err %v after %d probes, want ErrNotReady after 1", err, probes)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		err := WaitReady(t.Context(), []*Process{sleeper(t)}, time.Millisecond, 20*time.Millisecond, func(context.Context) bool { return false })
		if !errors.Is(err, ErrNotReady) {
			t.Fatalf("err %v, want ErrNotReady", err)
		}
	})
}
