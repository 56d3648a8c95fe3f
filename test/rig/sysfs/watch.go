package sysfs

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher turns inotify events on the tree's control directories into
// kicks of the reconcile loop. It never interprets events: the loop
// rescans, which keeps the emulator correct even if events coalesce.
type watcher struct {
	f    *os.File
	mu   sync.Mutex
	dirs map[string]bool
	done chan struct{}
}

const watchMask = unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_ATTRIB

func newWatcher(kick chan<- struct{}) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	// A non-blocking fd wrapped by os.NewFile goes through the runtime
	// poller, so Close unblocks the reader goroutine.
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), dirs: map[string]bool{}, done: make(chan struct{})}
	go w.read(kick)
	return w, nil
}

func (w *watcher) read(kick chan<- struct{}) {
	defer close(w.done)
	buf := make([]byte, 64*1024)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// watchDirs adds watches for directories not yet watched. Watches on
// removed directories vanish by themselves (IN_IGNORED); re-adding a
// recreated one is handled by forgetting paths that no longer exist.
func (w *watcher) watchDirs(dirs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range dirs {
		seen[d] = true
		if w.dirs[d] {
			continue
		}
		if _, err := unix.InotifyAddWatch(int(w.f.Fd()), d, watchMask); err == nil {
			w.dirs[d] = true
		}
	}
	for d := range w.dirs {
		if !seen[d] {
			delete(w.dirs, d)
		}
	}
}

func (w *watcher) Close() {
	w.f.Close()
	<-w.done
}
