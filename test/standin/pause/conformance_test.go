package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/proc"
	"github.com/sriov-lane/sriov-lane/test/standin/conformance"
)

// Conformance: what the sandbox image's program, kubernetes
// build/pause/linux/pause.c at pause 3.10, does with each thing the
// container runtime or a pod can hand it, and the stand-in doing exactly
// that.
type row = conformance.Row

const (
	pauseC   = "kubernetes/kubernetes build/pause/linux/pause.c@v1.36.3"
	asPlugin = "PAUSE_STANDIN_TEST_AS_PAUSE"
)

func TestMain(m *testing.M) {
	if os.Getenv(asPlugin) == "1" {
		main()
		os.Exit(0)
	}
	// A container runtime starts pause with every signal at its default.
	// A test run under nohup inherits SIGHUP ignored, and an ignored signal
	// stays ignored across exec (pause.c would keep it so too), while a
	// caught one is reset to its default: catching it here starts each
	// stand-in as a runtime would.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	os.Exit(m.Run())
}

// pause is the stand-in as a process of its own.
func pause(attr *syscall.SysProcAttr, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asPlugin+"=1")
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// ended says how cmd ended: "exit N" or "killed by <signal>".
func ended(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exit 0"
}

func runArgs(args ...string) func(*testing.T) string {
	return func(t *testing.T) string {
		cmd, stdout, _ := pause(nil, args...)
		err := cmd.Run()
		return ended(err) + ": " + strings.TrimSpace(stdout.String())
	}
}

// signalled starts pause, sends sig once it runs, and says how it ended
// and what it printed on stderr.
func signalled(sig syscall.Signal, args ...string) func(*testing.T) string {
	return func(t *testing.T) string {
		cmd, _, stderr := pause(nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The warning is printed once the handlers are about to be set.
		deadline := time.Now().Add(bound.Scaled(10 * time.Second))
		for !strings.Contains(stderr.String(), "first process") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return ended(err) + " | " + strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", " / ")
		case <-time.After(bound.Scaled(10 * time.Second)):
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("killing pause, still running 10 s after %v: %v", sig, err)
			}
			t.Logf("pause, still running 10 s after %v, killed: %s", sig, ended(<-done))
			return "still running"
		}
	}
}

// zombiesOf lists the zombie children of pid.
func zombiesOf(pid int) []string { return childrenOf(pid, true) }

// childrenOf lists pid's children that are zombies (zombie) or not.
func childrenOf(pid int, zombie bool) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 1 && (f[0] == "Z") == zombie && f[1] == strconv.Itoa(pid) {
			out = append(out, e.Name())
		}
	}
	return out
}

// reaping runs pause as PID 1 of a new PID namespace, orphans a process
// into it (nsenter's child exits, leaving its own child to the
// namespace's init) and says whether that one was reaped once it exited.
func reaping(t *testing.T) string {
	if os.Geteuid() != 0 {
		if os.Getenv("SRIOV_LANE_TEST_STRICT") == "1" {
			t.Fatal("prerequisite missing under SRIOV_LANE_TEST_STRICT=1: needs root (a PID namespace)")
		}
		t.Skip("needs root (a PID namespace)")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skipf("needs nsenter(1): %v", err)
	}
	cmd, _, stderr := pause(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := proc.Kill(cmd); err != nil {
			t.Log(err)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	// The orphan outlives pause's start by a second, and its reaping is
	// waited for (a loaded machine is slow), up to a bound a pause that
	// never reaps does not meet.
	orphan := exec.Command(nsenter, "-t", strconv.Itoa(cmd.Process.Pid), "-p", "--", "sh", "-c", "sleep 1 & exit 0")
	if out, err := orphan.CombinedOutput(); err != nil {
		t.Fatalf("orphaning a process into the namespace: %v\n%s", err, out)
	}
	deadline := time.Now().Add(bound.Scaled(10 * time.Second))
	for len(childrenOf(cmd.Process.Pid, false)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the orphan still runs
	}
	zombies := zombiesOf(cmd.Process.Pid)
	for ; len(zombies) > 0 && time.Now().Before(deadline); zombies = zombiesOf(cmd.Process.Pid) {
		time.Sleep(50 * time.Millisecond)
	}
	warned := strings.Contains(stderr.String(), "Warning")
	return fmt.Sprintf("zombies %d, warned %v", len(zombies), warned)
}

func TestConformancePause(t *testing.T) {
	conformance.Check(t, []row{
		{Src: pauseC + "; kubernetes/kubernetes build/pause/Makefile@v1.36.3 (CFLAGS -DVERSION=v$(TAG)-$(REV))", What: "-v: prints the version and exits 0",
			Got: runArgs("-v"), Want: "exit 0: pause.c v3.6-sriov-lane-standin"},
		{Src: pauseC + " (strcasecmp)", What: "-V, and -v after other arguments: the same", Got: func(t *testing.T) string {
			return runArgs("-V")(t) + " | " + runArgs("foo", "-v")(t)
		}, Want: "exit 0: pause.c v3.6-sriov-lane-standin | exit 0: pause.c v3.6-sriov-lane-standin"},
		{Src: pauseC, What: "SIGTERM (kubelet stopping the sandbox): psignal's line, exit 0; not PID 1: a warning first",
			Got: signalled(syscall.SIGTERM), Want: "exit 0 | Warning: pause should be the first process / Shutting down, got signal: Terminated"},
		{Src: pauseC, What: "SIGINT: the same", Got: signalled(syscall.SIGINT), Want: "exit 0 | Warning: pause should be the first process / Shutting down, got signal: Interrupt"},
		{Src: pauseC, What: "other arguments are ignored: it runs until signalled", Got: signalled(syscall.SIGTERM, "--no-such", "x"),
			Want: "exit 0 | Warning: pause should be the first process / Shutting down, got signal: Terminated"},
		{Src: pauseC, What: "a signal it does not handle (SIGHUP) keeps its default action: killed", Got: signalled(syscall.SIGHUP), Want: "killed by hangup | Warning: pause should be the first process"},
		{Src: pauseC + " (sigreap, SA_NOCLDSTOP)", What: "as PID 1 of the pod's PID namespace: orphans that exit are reaped, and no warning",
			Got: reaping, Want: "zombies 0, warned false"},
	})
}
