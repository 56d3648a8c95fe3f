package sriov_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// helperEnv selects a helper mode of the test binary: crash tests re-exec
// it as a separate process to run (and be killed during) a lane's steps,
// then to reverse them from a fresh process.
const helperEnv = "SX_SRIOV_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "up":
		os.Exit(report(helperUp()))
	case "down":
		os.Exit(report(helperDown()))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode")
		os.Exit(2)
	}
}

func report(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperUp leases SX_COUNT PFs, moves PF i into the i-th netns of
// SX_TARGETS and gives each SX_VFS vfio VFs. With SX_STOP_AT=K it prints
// STOPPED after the K-th journal record and waits to be killed.
func helperUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(time.Minute))
	defer cancel()
	stopAt, _ := strconv.Atoi(os.Getenv("SX_STOP_AT"))
	count, _ := strconv.Atoi(os.Getenv("SX_COUNT"))
	vfs, _ := strconv.Atoi(os.Getenv("SX_VFS"))
	targets := strings.Split(os.Getenv("SX_TARGETS"), ",")
	stateDir := os.Getenv("SX_STATE")
	j, err := journal.Open(filepath.Join(stateDir, "lane", "journal.jsonl"))
	if err != nil {
		return err
	}
	defer j.Close()
	records := 0
	s := &sriov.Session{Journal: j, Sysfs: sriov.Sysfs{Root: os.Getenv("SX_SYSFS")},
		AfterRecord: func(op string, phase journal.Phase) {
			records++
			if records == stopAt {
				fmt.Printf("STOPPED %s %s\n", op, phase)
				select {} // wait for SIGKILL
			}
		}}
	pfs, err := sriov.Discover(s.Sysfs)
	if err != nil {
		return err
	}
	got, err := sriov.NewLeaser(stateDir).Allocate(ctx, s, sriov.Request{Lane: "crash", Count: count, Candidates: pfs})
	if err != nil {
		return err
	}
	for i, pf := range got {
		if _, err := s.MovePF(ctx, pf, sriov.PathTarget(targets[i])); err != nil {
			return err
		}
		if _, err := s.ConfigureVFs(ctx, pf, sriov.VFOptions{Count: vfs}); err != nil {
			return err
		}
	}
	fmt.Printf("DONE %d\n", records)
	return nil
}

// helperDown reverses the journal in SX_STATE and prints the notes.
func helperDown() error {
	ctx, cancel := context.WithTimeout(context.Background(), bound.Scaled(time.Minute))
	defer cancel()
	j, err := journal.Open(filepath.Join(os.Getenv("SX_STATE"), "lane", "journal.jsonl"))
	if err != nil {
		return err
	}
	defer j.Close()
	return journal.Reverse(ctx, j, sriov.Undoers(sriov.Restorer{Sysfs: sriov.Sysfs{Root: os.Getenv("SX_SYSFS")}}), journal.ReverseOptions{
		Report: func(e *journal.Entry, note string, err error) {
			if note != "" {
				fmt.Printf("NOTE %s: %s\n", e.Op, note)
			}
		},
	})
}
