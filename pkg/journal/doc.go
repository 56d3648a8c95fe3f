// Package journal is the lane's write-ahead record of host changes.
//
// Every change the lane makes to the host (a lease, a PF moved, numvfs, a
// driver binding, a cluster) is appended here as an intent, fsynced, before it
// is made, and marked done after. Reverse walks the record backwards from any
// process, so `down` can finish the job after a crash or `kill -9` of `up`:
// an intent without its done mark may or may not have happened, and every
// undo is written to cope with both.
//
// The package touches only the journal file; the changes, and the undoers
// that reverse them, are its callers' (pkg/sriov, pkg/provider, pkg/lane).
//
// Where things live (TestDocFileMap keeps this list true):
//   - journal.go: the file, one JSON record a line; Open, locked by one
//     process (the lock dies with it, so a killed `up` never blocks
//     `down`), a torn last line cut; Read for read-only views; Begin,
//     Done, MarkUndone and Pending
//   - reverse.go: Undoers and Reverse, the pending entries undone newest
//     first, each marked undone as it goes
package journal
