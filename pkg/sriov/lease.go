package sriov

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// OpLease is the journal operation of taking a lease on a PF.
const OpLease = "sriov.lease"

// Lease is one PF's claim by a lane, stored as <dir>/<pci>.json. It is
// live while the lane's journal file exists: the journal is removed only
// once everything it recorded is undone.
type Lease struct {
	PCI     string    `json:"pci"`
	Name    string    `json:"name"`
	MAC     string    `json:"mac"`
	Lane    string    `json:"lane"`
	Journal string    `json:"journal"`
	PID     int       `json:"pid"`
	Time    time.Time `json:"time"`
}

// Leaser hands out PFs to lanes on one host. Every decision is taken under
// an flock on <dir>/.lock, so concurrent lanes (separate processes, or
// separate Leasers in one process) never get the same PF.
type Leaser struct {
	Dir string
}

// NewLeaser returns the Leaser of the lanes of stateDir.
func NewLeaser(stateDir string) *Leaser {
	return &Leaser{Dir: statedir.Dir(stateDir).Leases()}
}

// Request is what a lane asks of Allocate.
type Request struct {
	Lane  string
	Count int
	// Candidates are the discovered PFs (Discover).
	Candidates []PF
	Selection  Selection
}

func (l *Leaser) leasePath(pci string) string { return filepath.Join(l.Dir, pci+".json") }

// lock takes the leases lock, polling so ctx can cancel the wait.
func (l *Leaser) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating lease dir: %w", err)
	}
	path := filepath.Join(l.Dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lease lock: %w", err)
	}
	var lockErr error
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		lockErr = err
		return true, nil
	})
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("waiting for lease lock %s: %w", path, err)
	case lockErr != nil:
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, lockErr)
	}
	return func() { f.Close() }, nil
}

// Leases returns the current lease files, keyed by PCI address.
func (l *Leaser) Leases() (map[string]Lease, error) {
	ents, err := os.ReadDir(l.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Lease{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading leases: %w", err)
	}
	out := map[string]Lease{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.Dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading lease %s: %w", e.Name(), err)
		}
		var ls Lease
		if err := json.Unmarshal(b, &ls); err != nil {
			return nil, fmt.Errorf("parsing lease %s: %w", e.Name(), err)
		}
		out[ls.PCI] = ls
	}
	return out, nil
}

// live reports whether the lease's lane still exists.
func (ls Lease) live() bool {
	_, err := os.Stat(ls.Journal)
	return err == nil
}

// Allocate leases req.Count PFs for the lane recording into s's journal,
// lowest PCI addresses first. Leases of lanes whose journal is gone are
// reclaimed (reported through s.Log). When too few PFs are free it fails
// before changing anything, saying how many were needed, found, leased (by
// whom) and excluded.
func (l *Leaser) Allocate(ctx context.Context, s *Session, req Request) ([]PF, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("allocating PFs for lane %s: %w", req.Lane, err)
	}
	defer unlock()
	leases, err := l.Leases()
	if err != nil {
		return nil, fmt.Errorf("allocating PFs for lane %s: %w", req.Lane, err)
	}
	myJournal := s.Journal.Path()
	for pci, ls := range leases {
		if ls.Journal == myJournal || ls.live() {
			continue
		}
		if err := os.Remove(l.leasePath(pci)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reclaiming stale lease of %s: %w", pci, err)
		}
		s.warnf("reclaimed lease of %s (%s) from lane %q: its journal %s no longer exists", ls.Name, pci, ls.Lane, ls.Journal)
		delete(leases, pci)
	}

	cands := append([]PF(nil), req.Candidates...)
	sort.Slice(cands, func(i, j int) bool { return cands[i].PCI < cands[j].PCI })
	var free []PF
	excluded, absent := 0, 0
	leasedBy := map[string]int{}
	for _, pf := range cands {
		if ls, ok := leases[pf.PCI]; ok && ls.Journal != myJournal {
			leasedBy[ls.Lane]++
			continue
		}
		if ok, _ := req.Selection.Allows(pf); !ok {
			excluded++
			continue
		}
		if !pf.Present {
			absent++ // not in this netns and not leased: someone else's, or moved by hand
			continue
		}
		free = append(free, pf)
	}
	if len(free) < req.Count {
		return nil, fmt.Errorf("lane %s needs %d PFs but only %d are free: found %d SR-IOV PFs, %d leased by other lanes%s, %d excluded by the selection or in use by the host, %d not in this network namespace",
			req.Lane, req.Count, len(free), len(cands), sum(leasedBy), describeLeasers(leasedBy), excluded, absent)
	}
	chosen := free[:req.Count]
	for _, pf := range chosen {
		if err := l.lease(s, req.Lane, pf); err != nil {
			return nil, err
		}
	}
	return chosen, nil
}

// LeaseRecord is the journal data of OpLease.
type LeaseRecord struct {
	File  string `json:"file"`
	Lease Lease  `json:"lease"`
}

func (l *Leaser) lease(s *Session, lane string, pf PF) error {
	ls := Lease{PCI: pf.PCI, Name: pf.Name, MAC: pf.MAC, Lane: lane, Journal: s.Journal.Path(), PID: os.Getpid(), Time: time.Now().UTC()}
	rec := LeaseRecord{File: l.leasePath(pf.PCI), Lease: ls}
	e, err := s.begin(OpLease, rec)
	if err != nil {
		return fmt.Errorf("leasing %s: %w", pf, err)
	}
	b, err := json.MarshalIndent(ls, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(rec.File, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("leasing %s: %w", pf, err)
	}
	return s.done(e)
}

// undoLease removes the lease file if it still belongs to the journal that
// wrote it (a reclaimed lease may have been re-leased by another lane).
func undoLease(_ context.Context, rec LeaseRecord) (string, error) {
	b, err := os.ReadFile(rec.File)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("releasing lease %s: %w", rec.File, err)
	}
	var cur Lease
	if err := json.Unmarshal(b, &cur); err == nil && cur.Journal != rec.Lease.Journal {
		return fmt.Sprintf("lease of %s now belongs to lane %q; left alone", rec.Lease.PCI, cur.Lane), nil
	}
	if err := os.Remove(rec.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("releasing lease %s: %w", rec.File, err)
	}
	return "", nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describeLeasers(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for lane, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", lane, n))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}
