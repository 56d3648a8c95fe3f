package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/kernel/internal/wire"
)

func main() {
	console, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		console = os.Stderr
	}
	// PID 1 exiting panics the kernel; whatever happens here, the guest
	// powers off, and the host sees the missing end record.
	defer poweroff(console)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(console, "guest-init: panic: %v\n%s", r, debug.Stack())
		}
	}()
	if err := run(console); err != nil {
		fmt.Fprintf(console, "guest-init: %v\n", err)
	}
}

func poweroff(console io.Writer) {
	unix.Sync()
	fmt.Fprintln(console, "guest-init: power off")
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintf(console, "guest-init: power off: %v\n", err)
	}
	select {} // PID 1 must not return
}

func run(console io.Writer) error {
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/run", "tmpfs"}, {"tmpfs", "/tmp", "tmpfs"}, {"tmpfs", "/var/run", "tmpfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dst, err)
		}
	}
	port, err := os.OpenFile(wire.ResultPort, os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", wire.ResultPort, err)
	}
	// Raw output: no \n -> \r\n, so the stream is the bytes written.
	if t, err := unix.IoctlGetTermios(int(port.Fd()), unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(int(port.Fd()), unix.TCSETS, t)
	}
	enc := json.NewEncoder(port)
	send := func(r wire.Record) {
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(console, "guest-init: writing %s record: %v\n", r.Kind, err)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			send(wire.Record{Kind: wire.KindError, Error: fmt.Sprintf("panic: %v\n%s", r, debug.Stack())})
		}
		send(wire.Record{Kind: wire.KindEnd})
		// tcdrain: the last bytes must leave the UART before power off.
		_ = unix.IoctlSetInt(int(port.Fd()), unix.TCSBRK, 1)
		port.Close()
	}()
	if err := steps(console, send); err != nil {
		send(wire.Record{Kind: wire.KindError, Error: err.Error()})
	}
	return nil
}

func steps(console io.Writer, send func(wire.Record)) error {
	b, err := os.ReadFile(wire.ConfigPath)
	if err != nil {
		return err
	}
	var c wire.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%s: %w", wire.ConfigPath, err)
	}
	for _, m := range c.Modules {
		start := time.Now()
		r := wire.Record{Kind: wire.KindModule, Name: filepath.Base(m)}
		if err := loadModule(m); err != nil {
			r.Error = err.Error()
			fmt.Fprintf(console, "guest-init: %s: %v\n", m, err)
		}
		r.Duration = time.Since(start)
		send(r)
	}
	if err := os.MkdirAll(wire.OutDir, 0o755); err != nil {
		return err
	}
	for _, p := range c.Programs {
		send(runProgram(console, p))
	}
	return filepath.WalkDir(wire.OutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(wire.OutDir, p)
		r := wire.Record{Kind: wire.KindFile, Name: rel}
		if r.Data, err = readGzip(p); err != nil {
			r.Error = err.Error()
		} else {
			r.Gzip = true
		}
		send(r)
		return nil
	})
}

// readGzip is file's content, gzip-compressed.
func readGzip(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	z, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(z, f); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("finit_module: %w", err)
	}
	return nil
}

// runProgram runs p with its combined output captured and copied to the
// console, so a hang shows how far it got.
func runProgram(console io.Writer, p wire.Program) wire.Record {
	fmt.Fprintf(console, "guest-init: run %s: %s %q\n", p.Name, p.Path, p.Args)
	var out bytes.Buffer
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = "/tmp"
	cmd.Env = append([]string{"PATH=/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/tmp", "TMPDIR=/tmp",
		"SRIOV_LANE_GUEST=1", "SRIOV_LANE_GUEST_OUT=" + wire.OutDir}, p.Env...)
	cmd.Stdout = io.MultiWriter(&out, console)
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	err := cmd.Run()
	r := wire.Record{Kind: wire.KindRun, Name: p.Name, Output: out.String(), Duration: time.Since(start)}
	if err != nil {
		r.Exit = -1
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
			r.Exit = ee.ExitCode()
		} else {
			r.Error = err.Error()
		}
	}
	fmt.Fprintf(console, "guest-init: %s exited %d after %s\n", p.Name, r.Exit, r.Duration.Round(time.Millisecond))
	return r
}
