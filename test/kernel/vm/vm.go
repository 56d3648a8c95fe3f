package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/kernel/internal/wire"
)

// Program is one program the guest runs. Path is a static binary on the
// host (BuildStatic makes one).
type Program struct {
	Name, Path string
	Args, Env  []string
}

// Config is one guest boot.
type Config struct {
	Kernel   Kernel
	Programs []Program         // run one after another in the guest, in order
	Files    map[string]string // guest path -> host path, extra files in the initramfs
	PFs      int               // emulated igb NICs (default 2)
	Timeout  time.Duration     // whole guest bound (default DefaultTimeout); on expiry QEMU is killed
	// Nudge is how long the guest may be silent with its vCPU halted
	// before it is paused and resumed (nudge.go; default DefaultNudge).
	Nudge  time.Duration
	Memory int // MiB (default 1024)
	// Accel is QEMU's accelerator for this boot; "" takes $SRIOV_LANE_KERNEL_ACCEL,
	// else what make test-env's probe found for the kernel (Kernel.Accel), else tcg.
	Accel string
}

// Run is one program's end in the guest. Exit is -1 when it could not
// start or was killed by a signal.
type Run struct {
	Name     string
	Exit     int
	Output   string
	Duration time.Duration
}

// Module is one module guest-init loaded; Error is empty when it loaded.
type Module struct {
	Name  string
	Error string
}

// Result is what a guest sent back.
type Result struct {
	Runs    []Run
	Files   map[string][]byte // every file the programs left in $SRIOV_LANE_GUEST_OUT, by path relative to it
	Console string            // the kernel console log
	Modules []Module          // the modules loaded, in order
	Command []string          // the QEMU command line, to reproduce the boot
	// Nudges says when a silent guest with a halted vCPU was paused and
	// resumed (nudge.go), and what its vCPU and LAPIC timer were then.
	Nudges []string
}

// AccelEnv names the variable that, when set, chooses QEMU's accelerator
// for every boot ("tcg", "kvm"), over what make test-env's probe found
// (Kernel.Accel).
const AccelEnv = "SRIOV_LANE_KERNEL_ACCEL"

// KeepEnv names the variable that, set to 1, keeps a boot's directory
// (initramfs, console and result logs) for running its QEMU command line
// again by hand.
const KeepEnv = "SRIOV_LANE_KERNEL_KEEP"

const consoleTailLines = 60

// DefaultTimeout bounds a guest that sets no Timeout. A guest's suite has
// grown to minutes of guest time under TCG: when make test ran the tier
// niced beside the e2e lanes on this 2-core machine, a 6.12 guest's own
// tests took 12m41s before its scenario started, and both guests of that
// run were killed at a 15 min bound while still working (their vCPUs idle
// between steps, not stuck in the kernel). make test now runs the tier
// alone (hack/test-tiers.sh), ~2 min; the bound stays at twice the slowest
// whole run seen, as it only says when a hung guest fails, and the hang
// report says where it stood.
const DefaultTimeout = 30 * time.Minute

// shellLine is args as a shell command line, quoted where a shell would
// split or expand them, for copying from an error.
func shellLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+,.:/@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

func (c Config) withDefaults() Config {
	if c.PFs == 0 {
		c.PFs = 2
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Nudge == 0 {
		c.Nudge = DefaultNudge
	}
	if c.Memory == 0 {
		c.Memory = 1024
	}
	return c
}

// QEMUArgs is QEMU's argument list (without the program name) that boots
// c's kernel with the initramfs, the kernel console written to consoleLog
// (ttyS0) and the guest's records to resultLog (ttyS1). Each igb PF sits
// behind its own PCIe root port, at 0000:0N:00.0 for the N-th, so its VFs
// get bus numbers of their own; the emulated Intel IOMMU gives every VF
// its own IOMMU group, as on a host, so vfio-pci can take one. These are
// the options measured to work with QEMU 10.0.2 on Debian's 6.1 and 6.12;
// under KVM interrupt remapping needs the split irqchip ("Interrupt
// Remapping cannot work with kernel-irqchip=on", qemu/qemu
// hw/i386/x86-iommu.c x86_iommu_realize, read in the search tool's stored
// copy, no tag named there).
func QEMUArgs(c Config, initramfs, consoleLog, resultLog string) []string {
	c = c.withDefaults()
	accel := c.Accel
	for _, a := range []string{os.Getenv(AccelEnv), c.Kernel.Accel, "tcg"} {
		if accel == "" {
			accel = a
		}
	}
	args := []string{"-accel", accel}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	args = append(args,
		"-M", "q35,kernel-irqchip=split", "-m", strconv.Itoa(c.Memory), "-smp", "1",
		"-nodefaults", "-display", "none", "-no-reboot",
		"-device", "intel-iommu,intremap=on,caching-mode=on")
	for i := 1; i <= c.PFs; i++ {
		n := strconv.Itoa(i)
		args = append(args,
			"-device", "pcie-root-port,id=rp"+n+",slot="+n+",chassis="+n,
			"-netdev", "user,id=n"+n+",restrict=on",
			"-device", "igb,netdev=n"+n+",bus=rp"+n)
	}
	return append(args,
		"-kernel", c.Kernel.Vmlinuz, "-initrd", initramfs,
		// panic=-1: a kernel panic (PID 1 dying among them) reboots at
		// once, which -no-reboot turns into QEMU's exit. no_timer_check:
		// at boot the kernel counts timer ticks over a busy-wait of ten
		// ticks (timer_irq_works), and under TCG on a loaded host too few
		// arrive; with interrupt remapping on, check_timer then panics
		// "timer doesn't work through Interrupt-remapped IO-APIC" (seen
		// once on 6.1 beside a make test run). The option skips the count
		// (torvalds/linux arch/x86/kernel/apic/io_apic.c, read in the
		// search tool's stored copy, no tag named there). nokaslr: the
		// kernel sits at the addresses its System.map gives, so those a
		// hung guest's report holds can be named (hangReport).
		"-append", "console=ttyS0 intel_iommu=on panic=-1 no_timer_check nokaslr",
		"-serial", "file:"+consoleLog, "-serial", "file:"+resultLog)
}

// Start boots c.Kernel in QEMU with c's programs and returns what they did.
// The error names the kernel and holds the console's last lines when the
// guest hung, crashed or died before it ended its result stream.
func Start(ctx context.Context, c Config) (*Result, error) {
	c = c.withDefaults()
	fail := func(err error) (*Result, error) { return nil, fmt.Errorf("kernel %s: %w", c.Kernel.Name, err) }
	if c.Kernel.Vmlinuz == "" {
		return fail(errors.New("no kernel image (Config.Kernel comes from Kernels or RequireKernels)"))
	}
	work, err := os.MkdirTemp("", "sriov-lane-vm-")
	if err != nil {
		return fail(err)
	}
	if os.Getenv(KeepEnv) == "1" {
		fmt.Fprintf(os.Stderr, "vm: kernel %s: keeping %s (%s=1)\n", c.Kernel.Name, work, KeepEnv)
	} else {
		defer os.RemoveAll(work)
	}
	initPath := filepath.Join(work, "init")
	if err := buildGuestInit(ctx, initPath); err != nil {
		return fail(err)
	}
	initramfs := filepath.Join(work, "initramfs.cpio")
	if err := writeInitramfs(initramfs, initPath, c); err != nil {
		return fail(fmt.Errorf("initramfs: %w", err))
	}
	consoleLog, resultLog := filepath.Join(work, "console.log"), filepath.Join(work, "results.jsonl")
	// The monitor's socket is for hangReport; a boot run by hand needs none.
	qmpSock := filepath.Join(work, "qmp.sock")
	args := QEMUArgs(c, initramfs, consoleLog, resultLog)
	res := &Result{Command: append([]string{qemuBinary}, args...)}
	cmdLine := shellLine(res.Command)
	cmd := exec.CommandContext(ctx, qemuBinary, append(args, "-qmp", "unix:"+qmpSock+",server=on,wait=off")...)
	var qemuOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qemuOut, &qemuOut
	cmd.WaitDelay = 10 * time.Second
	var hang string // set when the guest outlived c.Timeout
	runErr := cmd.Start()
	if runErr == nil {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		bound := time.NewTimer(c.Timeout)
		defer bound.Stop()
		check := time.NewTicker(nudgeCheck(c.Nudge))
		defer check.Stop()
		quiet := silence{files: []string{consoleLog, resultLog}}
	wait:
		for {
			select {
			case runErr = <-done:
				break wait
			case <-bound.C:
				hang = hangReport(qmpSock, cmd.Process.Pid, c.Kernel.Release)
				_ = cmd.Process.Kill()
				runErr = <-done
				break wait
			case now := <-check.C:
				if q := quiet.quietFor(now); q >= c.Nudge {
					if n := nudge(qmpSock, q); n != "" {
						res.Nudges = append(res.Nudges, n)
					}
					quiet.since = now // one nudge per silence of c.Nudge
				}
			}
		}
	}
	console, _ := os.ReadFile(consoleLog)
	res.Console = string(console)
	tail := "console (last lines):\n" + consoleTail(res.Console, consoleTailLines)
	switch {
	case hang != "":
		if len(res.Nudges) > 0 {
			hang += "nudged before (nudge.go):\n" + indent(strings.Join(res.Nudges, "\n"), "  ")
		}
		return res, fmt.Errorf("kernel %s: guest did not end within %s; QEMU killed\n%s\n%s\nQEMU: %s", c.Kernel.Name, c.Timeout, tail, hang, cmdLine)
	case runErr != nil:
		return res, fmt.Errorf("kernel %s: qemu: %w: %s\n%s\nQEMU: %s", c.Kernel.Name, runErr, strings.TrimSpace(qemuOut.String()), tail, cmdLine)
	}
	stream, err := os.ReadFile(resultLog)
	if err != nil {
		return res, fmt.Errorf("kernel %s: %w", c.Kernel.Name, err)
	}
	return res, collect(c.Kernel.Name, stream, res)
}

// collect parses the guest's result stream into res, which holds the
// console and command line; its error names the kernel and carries both.
func collect(kernel string, stream []byte, res *Result) error {
	if err := parseResults(stream, res); err != nil {
		return fmt.Errorf("kernel %s: %w\nconsole (last lines):\n%s\nQEMU: %s", kernel, err,
			consoleTail(res.Console, consoleTailLines), shellLine(res.Command))
	}
	return nil
}

// parseResults reads guest-init's records into res. A stream without the
// end record means the guest died (a panic, an oops, a program that took
// PID 1 with it) before it told everything.
func parseResults(stream []byte, res *Result) error {
	ended := false
	var guestErrs []string
	for i, line := range bytes.Split(stream, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if ended {
			return fmt.Errorf("result line %d after the end record", i+1)
		}
		var r wire.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("result line %d: %w (%.200q)", i+1, err, line)
		}
		switch r.Kind {
		case wire.KindModule:
			res.Modules = append(res.Modules, Module{Name: r.Name, Error: r.Error})
		case wire.KindRun:
			out := r.Output
			if r.Error != "" {
				out += "\nguest-init: " + r.Error
			}
			res.Runs = append(res.Runs, Run{Name: r.Name, Exit: r.Exit, Output: out, Duration: r.Duration})
		case wire.KindFile:
			if r.Error != "" {
				guestErrs = append(guestErrs, "reading "+r.Name+": "+r.Error)
				continue
			}
			data := r.Data
			if r.Gzip {
				z, err := gzip.NewReader(bytes.NewReader(r.Data))
				if err == nil {
					data, err = io.ReadAll(z)
				}
				if err != nil {
					return fmt.Errorf("result line %d: file %s: %w", i+1, r.Name, err)
				}
			}
			if res.Files == nil {
				res.Files = map[string][]byte{}
			}
			res.Files[r.Name] = data
		case wire.KindError:
			guestErrs = append(guestErrs, r.Error)
		case wire.KindEnd:
			ended = true
		default:
			return fmt.Errorf("result line %d: unknown record kind %q", i+1, r.Kind)
		}
	}
	if !ended {
		return errors.New("the guest's result stream has no end record: the guest died before guest-init finished")
	}
	if len(guestErrs) > 0 {
		return fmt.Errorf("guest-init: %s", strings.Join(guestErrs, "; "))
	}
	return nil
}

// consoleTail is the last n lines of a console log.
func consoleTail(console string, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(console, "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeInitramfs writes the guest's root: /init, its config, the modules,
// the programs and c.Files, and /dev/console (the kernel opens it for
// /init before anything mounts devtmpfs).
func writeInitramfs(file, initPath string, c Config) error {
	var buf bytes.Buffer
	w := newCPIO(&buf)
	add := func(guest, host string) error {
		b, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		perm := uint32(0o644)
		if st, err := os.Stat(host); err == nil {
			perm = uint32(st.Mode().Perm())
		}
		w.file(guest, perm, b)
		return nil
	}
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "var/run", wire.OutDir} {
		w.mkdirAll(d)
	}
	w.charDev("/dev/console", 0o600, 5, 1)
	if err := add("/init", initPath); err != nil {
		return err
	}
	gc := wire.Config{}
	for _, m := range c.Kernel.Modules {
		g := "/lib/modules/" + filepath.Base(m)
		if err := add(g, m); err != nil {
			return err
		}
		gc.Modules = append(gc.Modules, g)
	}
	placed := map[string]string{} // host path -> guest path: a binary run twice is carried once
	for i, p := range c.Programs {
		g, ok := placed[p.Path]
		if !ok {
			g = fmt.Sprintf("/programs/%02d-%s", i, path.Base(filepath.ToSlash(p.Path)))
			if err := add(g, p.Path); err != nil {
				return fmt.Errorf("program %s: %w", p.Name, err)
			}
			placed[p.Path] = g
		}
		env := p.Env
		if v, ok := os.LookupEnv(bound.ScaleEnv); ok {
			// The guest's bounds scale as the host's tests' do.
			env = append(append([]string(nil), env...), bound.ScaleEnv+"="+v)
		}
		gc.Programs = append(gc.Programs, wire.Program{Name: p.Name, Path: g, Args: p.Args, Env: env})
	}
	for g, h := range c.Files {
		if err := add(g, h); err != nil {
			return err
		}
	}
	b, err := json.Marshal(gc)
	if err != nil {
		return err
	}
	w.file(wire.ConfigPath, 0o644, b)
	if err := w.close(); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}

// moduleDir is the directory of this module's go.mod, found from this
// file's place in it (test/kernel/vm).
func moduleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no caller information to find the module")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("finding the module from %s: %w", file, err)
	}
	return dir, nil
}

// buildGuestInit builds test/kernel/cmd/guest-init, static, to out.
func buildGuestInit(ctx context.Context, out string) error {
	dir, err := moduleDir()
	if err != nil {
		return err
	}
	return goBuild(ctx, dir, "./test/kernel/cmd/guest-init", false, out)
}

func goBuild(ctx context.Context, dir, pkg string, test bool, out string) error {
	args := []string{"build", "-o", out, pkg}
	if test {
		args = []string{"test", "-c", "-o", out, pkg}
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s (in %s): %w: %s", strings.Join(args, " "), dir, err, b)
	}
	return nil
}

// BuildStatic builds pkg of this module (a main package, or with test its
// test binary, `go test -c`) with CGO_ENABLED=0 into a t.TempDir() and
// returns the binary's path. The guest has no libc.
func BuildStatic(t testing.TB, pkg string, test bool) string {
	t.Helper()
	dir, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	name := path.Base(pkg)
	if name == "." || name == "/" {
		name = "program"
	}
	out := filepath.Join(t.TempDir(), name)
	if test {
		out += ".test"
	}
	if err := goBuild(context.Background(), dir, pkg, test, out); err != nil {
		t.Fatal(err)
	}
	return out
}
