package sriov

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWriteSharedReissuesALostWrite plays a shared control file whose first
// write is overwritten by another writer before it is consumed: the effect
// must still happen, through a second write.
func TestWriteSharedReissuesALostWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bind")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var seen, bound atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the "kernel": loses the first write, honours the next
		for ctx.Err() == nil {
			b, _ := os.ReadFile(path)
			if strings.TrimSpace(string(b)) == "0000:40:10.0" {
				os.WriteFile(path, []byte("0000:41:10.0\n"), 0o644) // another lane's write wins
				if seen.Add(1) >= 2 {
					bound.Store(1)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	start := time.Now()
	err := writeShared(context.Background(), 5*time.Second, path, "0000:40:10.0", "bind", func() (bool, error) { return bound.Load() == 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	if seen.Load() < 2 || time.Since(start) > 3*time.Second {
		t.Fatalf("writes seen %d in %s", seen.Load(), time.Since(start))
	}
}

func TestWriteSharedGivesUpAtTheDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bind")
	os.WriteFile(path, nil, 0o644)
	start := time.Now()
	err := writeShared(context.Background(), 300*time.Millisecond, path, "x", "the impossible", func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "not done after 300ms") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %s past a 300ms deadline", d)
	}
	// A missing attribute is an error at once, as on real sysfs.
	if err := writeShared(context.Background(), time.Second, path+"-missing", "x", "w", func() (bool, error) { return true, nil }); err == nil {
		t.Fatal("write to a missing attribute succeeded")
	}
}
