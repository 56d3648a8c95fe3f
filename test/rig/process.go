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
)

// emulatorMarker is looked for in a process's command line before it is
// signalled, so a recycled PID is never killed.
const emulatorMarker = "emulate"

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
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
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
			return 0, fmt.Errorf("emulator did not report ready within 10s; see %s", filepath.Join(dir, LogFile))
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

// stopEmulator sends SIGTERM, then SIGKILL after 5 s.
func stopEmulator(pid int) error {
	if !emulatorAlive(pid) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping emulator (pid %d): %w", pid, err)
	}
	for i := 0; i < 500; i++ {
		if !emulatorAlive(pid) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if !emulatorAlive(pid) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("emulator (pid %d) does not stop", pid)
}
