package lane

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// undoers reverses everything the lane journals; force lets PFs return to
// the current netns even if they were taken from another.
func undoers(l *config.Lane, cli *client.Client, p *provider.Provider, force bool) journal.Undoers {
	return sriov.Undoers(sriov.Restorer{Sysfs: sriov.Sysfs{Root: l.SysfsRoot}, Docker: cli, Force: force, VFIODir: l.VFIODir}).
		Merge(provider.Undoers(p), laneUndoers())
}

// laneUndoers are the undoers of the lane's own operations.
func laneUndoers() journal.Undoers {
	return journal.Undoers{OpFile: journal.UndoRecord(undoFile), OpHostSysctls: journal.UndoRecord(undoHostSysctls)}
}

// undoFile puts back the file writeOutsideFile replaced, or removes the one
// it made.
func undoFile(_ context.Context, r fileRecord) (string, error) {
	if r.Backup != "" {
		_, err := os.Stat(r.Backup)
		if errors.Is(err, os.ErrNotExist) {
			// Backup never made: the file was never replaced.
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if err := copyKeepingMode(r.Backup, r.Path); err != nil {
			return "", fmt.Errorf("restoring %s: %w", r.Path, err)
		}
		if err := os.Remove(r.Backup); err != nil {
			return "", fmt.Errorf("restored %s, but removing its backup: %w", r.Path, err)
		}
		return "restored " + r.Path, nil
	}
	if err := os.Remove(r.Path); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("removing %s: %w", r.Path, err)
	}
	return "", nil
}

// undoHostSysctls drops the lane's hold on the host sysctls; the host's
// last lane gives back what kubelet changed (hostsysctl.go).
func undoHostSysctls(_ context.Context, rec sysctlRecord) (string, error) {
	h := sysctlHost{Root: "/proc/sys", StateDir: rec.StateDir}
	return h.release(rec.Lane, func(lane string) bool { return statedir.Dir(rec.StateDir).Lane(lane).HasJournal() })
}
