package sriov

import (
	"github.com/sriov-lane/sriov-lane/pkg/containerns"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// Session is one lane's use of this package: every change goes through its
// journal, intent first.
type Session struct {
	Journal *journal.Journal
	Sysfs   Sysfs
	// Docker resolves container targets; nil when none are used.
	Docker containerns.Inspector
	// Log shows what the user should know (reclaimed leases, renamed
	// links) as warnings; nil discards.
	Log log.Logger
	// AfterRecord, when set, runs after each journal record this package
	// writes. Crash tests use it to kill the process at a chosen step.
	AfterRecord func(op string, phase journal.Phase)
}

func (s *Session) warnf(format string, args ...any) {
	if s.Log != nil {
		s.Log.Warnf(format, args...)
	}
}

func (s *Session) begin(op string, data any) (*journal.Entry, error) {
	e, err := s.Journal.Begin(op, data)
	if err != nil {
		return nil, err
	}
	if s.AfterRecord != nil {
		s.AfterRecord(op, journal.Intent)
	}
	return e, nil
}

func (s *Session) done(e *journal.Entry) error {
	if err := s.Journal.Done(e); err != nil {
		return err
	}
	if s.AfterRecord != nil {
		s.AfterRecord(e.Op, journal.Done)
	}
	return nil
}

// Restorer returns what Undoers needs to reverse this session's journal.
func (s *Session) Restorer() Restorer {
	return Restorer{Sysfs: s.Sysfs, Docker: s.Docker}
}
