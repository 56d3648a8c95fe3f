package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Phase is what a record says about its operation.
type Phase string

const (
	// Intent is written before the change is made.
	Intent Phase = "intent"
	// Done is written after the change succeeded.
	Done Phase = "done"
	// Undone is written after the change was reversed (or found not to exist).
	Undone Phase = "undone"
)

// record is one line of the journal file.
type record struct {
	Seq   int             `json:"seq"`
	Ref   int             `json:"ref,omitempty"`
	Phase Phase           `json:"phase"`
	Op    string          `json:"op,omitempty"`
	Time  time.Time       `json:"time"`
	Data  json.RawMessage `json:"data,omitempty"`
	Note  string          `json:"note,omitempty"`
}

// Entry is an operation as the journal knows it: its intent, and whether it
// was marked done or undone since.
type Entry struct {
	Seq    int
	Op     string
	Time   time.Time
	Data   json.RawMessage
	Done   bool
	Undone bool
	Note   string
}

// Decode unmarshals the entry's data into v.
func (e Entry) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decoding journal entry %d (%s): %w", e.Seq, e.Op, err)
	}
	return nil
}

// Journal is an open, exclusively locked journal file.
type Journal struct {
	path    string
	f       *os.File
	next    int
	entries []*Entry
	bySeq   map[int]*Entry
}

// ErrBusy is returned when another live process holds the journal.
var ErrBusy = errors.New("journal is in use by another sriov-lane process")

// Open opens (creating if needed) the journal at path and locks it for this
// process. The lock dies with the process, so a killed `up` never blocks the
// `down` that cleans up after it.
func Open(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating journal directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening journal %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrBusy)
		}
		return nil, fmt.Errorf("locking journal %s: %w", path, err)
	}
	j := &Journal{path: path, f: f, next: 1, bySeq: map[int]*Entry{}}
	good, err := j.load()
	if err != nil {
		f.Close()
		return nil, err
	}
	// Cut a torn last line off before appending, or the next record would
	// be glued onto it and the journal would no longer parse.
	if fi, err := f.Stat(); err == nil && fi.Size() > good {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("cutting torn tail of journal %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return j, nil
}

// Read loads a journal without locking it, for read-only views (status).
func Read(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	j := &Journal{path: path, f: f, next: 1, bySeq: map[int]*Entry{}}
	if _, err := j.load(); err != nil {
		return nil, err
	}
	return j.Entries(), nil
}

// load reads every record and returns the offset just past the last good
// line.
func (j *Journal) load() (int64, error) {
	if _, err := j.f.Seek(0, 0); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(j.f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	var good int64
	for sc.Scan() {
		line++
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A crash can tear only the last line: the write that was in
			// flight. Its change was never started, so it is safe to drop.
			if !sc.Scan() {
				break
			}
			return 0, fmt.Errorf("journal %s line %d is corrupt: %w", j.path, line, err)
		}
		good += int64(len(sc.Bytes())) + 1
		j.apply(r)
	}
	return good, sc.Err()
}

func (j *Journal) apply(r record) {
	if r.Seq >= j.next {
		j.next = r.Seq + 1
	}
	switch r.Phase {
	case Intent:
		e := &Entry{Seq: r.Seq, Op: r.Op, Time: r.Time, Data: r.Data}
		j.entries = append(j.entries, e)
		j.bySeq[r.Seq] = e
	case Done:
		if e := j.bySeq[r.Ref]; e != nil {
			e.Done = true
		}
	case Undone:
		if e := j.bySeq[r.Ref]; e != nil {
			e.Undone = true
			e.Note = r.Note
		}
	}
}

func (j *Journal) append(r record) error {
	r.Seq = j.next
	r.Time = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("writing journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("syncing journal %s: %w", j.path, err)
	}
	j.next++
	j.apply(r)
	return nil
}

// Path returns the journal's file path.
func (j *Journal) Path() string { return j.path }

// Begin records the intent to make a change, durably, and returns its entry.
// Call it before touching the host; call Done after.
func (j *Journal) Begin(op string, data any) (*Entry, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encoding journal data for %s: %w", op, err)
	}
	if err := j.append(record{Phase: Intent, Op: op, Data: raw}); err != nil {
		return nil, err
	}
	return j.entries[len(j.entries)-1], nil
}

// Done marks e as having happened.
func (j *Journal) Done(e *Entry) error {
	return j.append(record{Phase: Done, Ref: e.Seq})
}

// MarkUndone records that e's change is reversed (note says how, if unusual).
func (j *Journal) MarkUndone(e *Entry, note string) error {
	return j.append(record{Phase: Undone, Ref: e.Seq, Note: note})
}

// Entries returns a copy of every entry, oldest first.
func (j *Journal) Entries() []Entry {
	out := make([]Entry, 0, len(j.entries))
	for _, e := range j.entries {
		out = append(out, *e)
	}
	return out
}

// Pending returns the entries not yet undone, newest first: the order in
// which they must be reversed.
func (j *Journal) Pending() []*Entry {
	var out []*Entry
	for i := len(j.entries) - 1; i >= 0; i-- {
		if !j.entries[i].Undone {
			out = append(out, j.entries[i])
		}
	}
	return out
}

// Close releases the lock.
func (j *Journal) Close() error { return j.f.Close() }

// Remove deletes the journal file; only call it when nothing is pending.
func (j *Journal) Remove() error {
	if p := j.Pending(); len(p) > 0 {
		return fmt.Errorf("journal %s still has %d pending changes", j.path, len(p))
	}
	if err := os.Remove(j.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return j.f.Close()
}
