package journal

import (
	"context"
	"errors"
	"fmt"
)

// UndoFunc reverses one journalled operation. It must be idempotent and must
// cope with an intent that never happened (e.Done false) and with objects
// that are already gone: those succeed, with a note saying so.
type UndoFunc func(ctx context.Context, e *Entry) (note string, err error)

// UndoRecord is the UndoFunc of an operation whose entries hold an R: undo
// is given the record, and an entry that does not decode fails as every
// other one does.
func UndoRecord[R any](undo func(ctx context.Context, rec R) (note string, err error)) UndoFunc {
	return func(ctx context.Context, e *Entry) (string, error) {
		var rec R
		if err := e.Decode(&rec); err != nil {
			return "", err
		}
		return undo(ctx, rec)
	}
}

// Undoers maps operation names to their undo.
type Undoers map[string]UndoFunc

// Merge returns the union of u and others; later maps win on clashes.
func (u Undoers) Merge(others ...Undoers) Undoers {
	out := Undoers{}
	for _, m := range append([]Undoers{u}, others...) {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// ReverseOptions tune Reverse.
type ReverseOptions struct {
	// KeepGoing continues past a failed undo instead of stopping. The default
	// stops, so nothing after a PF that failed to come back (a cluster whose
	// deletion would strand it) is torn down before a retry.
	KeepGoing bool
	// Before is called before each undo starts.
	Before func(e *Entry)
	// Report is called after each undo with its entry, note and error.
	Report func(e *Entry, note string, err error)
	// Only, when set, narrows the undo to the entries it accepts; the
	// others stay pending (repair undoes one agent's share of a lane).
	Only func(e *Entry) bool
}

// Reverse undoes every pending entry of j, newest first, marking each undone
// as it goes, so a Reverse interrupted half way resumes where it stopped.
func Reverse(ctx context.Context, j *Journal, undoers Undoers, opts ReverseOptions) error {
	var errs []error
	for _, e := range j.Pending() {
		if opts.Only != nil && !opts.Only(e) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if opts.Before != nil {
			opts.Before(e)
		}
		undo, ok := undoers[e.Op]
		var note string
		var err error
		if !ok {
			err = fmt.Errorf("no undo known for journal operation %q (entry %d): is this sriov-lane older than the one that wrote %s?", e.Op, e.Seq, j.Path())
		} else {
			note, err = undo(ctx, e)
		}
		if opts.Report != nil {
			opts.Report(e, note, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("undoing %s (journal entry %d): %w", e.Op, e.Seq, err))
			if !opts.KeepGoing {
				break
			}
			continue
		}
		if err := j.MarkUndone(e, note); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}
