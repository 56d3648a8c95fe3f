package rig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// emulatorMarker is looked for in a process's command line before it is
// signalled, so a recycled PID is never killed.
const emulatorMarker = "emulate"

const (
	// emulatorStartTimeout bounds the emulator's start: a FUSE mount and a
	// pid file, well under a second on an idle host.
	emulatorStartTimeout = 10 * time.Second
	// emulatorStopGrace is what SIGTERM gets (the emulator unmounts its
	// sysfs and exits) before SIGKILL; emulatorKillWait what SIGKILL gets.
	emulatorStopGrace = 5 * time.Second
	emulatorKillWait  = time.Second
	emulatorPoll      = 10 * time.Millisecond
)

// startEmulator runs cmd detached and waits until it writes DIR/emulator.pid.
func startEmulator(ctx context.Context, dir string, argv []string) (int, error) {
	_ = os.Remove(filepath.Join(dir, PIDFile))
	logf, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("opening emulator log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own session: the emulator outlives `lane-rig up` and its terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting emulator %v: %w", argv, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(emulatorStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(emulatorPoll)
	defer tick.Stop()
	for {
		if readPIDFile(dir) == pid {
			return pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("emulator exited during start-up (%v); see %s", err, filepath.Join(dir, LogFile))
		case <-deadline.C:
			_ = stopEmulator(pid)
			return 0, fmt.Errorf("emulator did not report ready within %v; see %s", emulatorStartTimeout, filepath.Join(dir, LogFile))
		case <-ctx.Done():
			_ = stopEmulator(pid)
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// WritePIDFile is called by the emulator process once it is running.
func WritePIDFile(dir string) error {
	return os.WriteFile(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

func readPIDFile(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// emulatorAlive reports whether pid is a running (not zombie) emulator.
func emulatorAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(emulatorMarker)) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 (after "(comm)") is the state; Z is a zombie.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// stopEmulator sends SIGTERM, then SIGKILL after emulatorStopGrace.
func stopEmulator(pid int) error {
	if !emulatorAlive(pid) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping emulator (pid %d): %w", pid, err)
	}
	// Not the caller's context: a cancelled test still stops its emulator.
	gone := func(context.Context) (bool, error) { return !emulatorAlive(pid), nil }
	if wait.PollUntilContextTimeout(context.Background(), emulatorPoll, emulatorStopGrace, true, gone) == nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if wait.PollUntilContextTimeout(context.Background(), emulatorPoll, emulatorKillWait, true, gone) == nil {
		return nil
	}
	return fmt.Errorf("emulator (pid %d) does not stop", pid)
}
