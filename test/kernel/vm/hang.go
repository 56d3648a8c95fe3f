package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// A guest that outlives its bound is asked, through QEMU's monitor (QMP on
// a socket in the boot's directory), what it is doing before QEMU is
// killed. A silent console cannot tell apart the ways a guest stops: QEMU
// itself stuck (the monitor does not answer), a vCPU that halted and
// never got the interrupt to wake it (QEMU uses no CPU, the instruction
// pointer stays put), and a guest kernel spinning with interrupts off (QEMU
// busy, no timer runs, so neither the hung-task nor the RCU-stall detector
// can print). Seen once on 6.1 beside a loaded make test: the guest stopped
// mid-scenario with no line on its console for five minutes.

// hangSample is how long hangReport watches QEMU's CPU time and the
// vCPU's registers change.
const hangSample = 10 * time.Second

// qmpBound bounds each exchange with QEMU's monitor.
const qmpBound = 10 * time.Second

// stackWords is how many 8-byte words of the vCPU's stack hangReport
// reads for return addresses.
const stackWords = 256

// hangReport is what QEMU (process pid, monitor at sock) says of a guest
// that did not end: its run state, the vCPU's registers twice hangSample
// apart, the CPU time QEMU used between them, and the kernel addresses on
// the vCPU's stack, a rough backtrace. Debian's kernel package ships no
// symbols (its System.map is a stub pointing at linux-image-<release>-dbg),
// so the addresses stay numbers: the guest boots with nokaslr, and the
// -dbg package's System.map names them.
func hangReport(sock string, pid int, release string) string {
	var b strings.Builder
	b.WriteString("what QEMU said of the guest before it was killed:\n")
	cpu0, cpuErr := processCPU(pid)
	// The monitor runs in QEMU's main loop under its big lock, which a
	// vCPU thread holds while it emulates a device's register access: a
	// vCPU stuck in an emulated device leaves the monitor silent.
	status, err := qmpStatus(sock)
	if err != nil {
		fmt.Fprintf(&b, "  the monitor did not answer (%v): QEMU's main loop is stuck (a vCPU stuck in an emulated device holds its lock) or starved of CPU\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "  run state: %s\n", status)
	first, err := qmpHuman(sock, "info registers")
	if err != nil {
		fmt.Fprintf(&b, "  no registers: %v\n", err)
		return b.String()
	}
	time.Sleep(hangSample)
	cpu1, err := processCPU(pid)
	cpuErr = errors.Join(cpuErr, err)
	second, err := qmpHuman(sock, "info registers")
	if err != nil {
		second = "(no answer: " + err.Error() + ")"
	}
	if cpuErr == nil {
		fmt.Fprintf(&b, "  QEMU's CPU time over %s: %s (none: the vCPU is halted, or QEMU starved; about all of it: the guest is running)\n",
			hangSample, cpu1-cpu0)
	}
	fmt.Fprintf(&b, "  vCPU, first: %s\n  vCPU, %s later: %s\n", regLine(first), hangSample, regLine(second))
	fmt.Fprintf(&b, "  (RFL's IF bit 0x200 clear: interrupts off; HLT=1: halted, waiting for one)\n%s", indent(generalRegs(first), "    "))
	if lapic, err := qmpHuman(sock, "info lapic"); err == nil {
		fmt.Fprintf(&b, "  LAPIC timer (masked, or a count of 0 in one-shot mode: no timer interrupt is coming): %s\n", lapicTimer(lapic))
	}
	rsp, ok := register(first, "RSP")
	if !ok {
		b.WriteString("  no stack: no RSP in the registers\n")
		return b.String()
	}
	// HMP's x takes no register name on x86-64 ("unknown register").
	stack, err := qmpHuman(sock, fmt.Sprintf("x/%dgx %#x", stackWords, rsp))
	if err != nil {
		fmt.Fprintf(&b, "  no stack: %v\n", err)
		return b.String()
	}
	var addrs []string
	for _, w := range memoryWords(stack) {
		if kernelAddress(w) {
			addrs = append(addrs, fmt.Sprintf("%#x", w))
		}
	}
	if len(addrs) == 0 {
		addrs = []string{"(none)"}
	}
	fmt.Fprintf(&b, "  kernel addresses on the stack, innermost first (named by System.map-%s of linux-image-%s-dbg):\n%s",
		release, release, indent(strings.Join(addrs, "\n"), "    "))
	return b.String()
}

// kernelAddress says whether a lies where x86-64 maps the kernel image
// and its modules: from __START_KERNEL_map, 0xffffffff80000000, up to the
// fixmap at 0xffffffffff000000 (torvalds/linux
// Documentation/arch/x86/x86_64/mm.rst, read in the search tool's stored
// copies, no tag named there). Return addresses on a kernel stack lie
// there; most other words do not.
func kernelAddress(a uint64) bool { return a >= 0xffffffff80000000 && a < 0xffffffffff000000 }

// register is the value of register r in an "info registers" dump.
func register(regs, r string) (uint64, bool) {
	for _, f := range strings.Fields(regs) {
		if v, ok := strings.CutPrefix(f, r+"="); ok {
			n, err := strconv.ParseUint(v, 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// memoryWords are the words of an "x/Ngx" dump, in address order: lines
// of "<address>: 0x<word> 0x<word>".
func memoryWords(dump string) []uint64 {
	var out []uint64
	for _, l := range strings.Split(dump, "\n") {
		_, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if n, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// generalRegs is the general registers' part of an "info registers" dump,
// up to the segment registers.
func generalRegs(regs string) string {
	var out []string
	for _, l := range strings.Split(regs, "\n") {
		if strings.HasPrefix(l, "ES =") {
			break
		}
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimRight(l, "\r "))
		}
	}
	return strings.Join(out, "\n")
}

// regLine is the instruction pointer, flags and halt state out of an
// "info registers" dump.
func regLine(regs string) string {
	var out []string
	for _, f := range strings.Fields(regs) {
		for _, k := range []string{"RIP=", "RFL=", "HLT="} {
			if strings.HasPrefix(f, k) {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(regs)
	}
	return strings.Join(out, " ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// processCPU is the user and system CPU time pid has used
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 and 15, counted from field 3
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// qmpStatus is QEMU's run state ("running", "paused", ...).
func qmpStatus(sock string) (string, error) {
	var r struct {
		Status string `json:"status"`
	}
	if err := qmp(sock, "query-status", nil, &r); err != nil {
		return "", err
	}
	return r.Status, nil
}

// qmpHuman runs a human monitor command and returns its text.
func qmpHuman(sock, command string) (string, error) {
	var out string
	err := qmp(sock, "human-monitor-command", map[string]string{"command-line": command}, &out)
	return out, err
}

// qmp runs one QMP command on a connection of its own: the greeting, the
// capabilities negotiation, then the command, skipping asynchronous events
// (qemu/qemu docs/interop/qmp-spec.rst).
func qmp(sock, command string, args any, ret any) error {
	conn, err := net.DialTimeout("unix", sock, qmpBound)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(qmpBound)); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(conn))
	var greeting map[string]json.RawMessage
	if err := dec.Decode(&greeting); err != nil {
		return fmt.Errorf("QMP greeting: %w", err)
	}
	exec := func(cmd string, args any, ret any) error {
		req := map[string]any{"execute": cmd}
		if args != nil {
			req["arguments"] = args
		}
		if err := json.NewEncoder(conn).Encode(req); err != nil {
			return err
		}
		for {
			var resp struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
				Event string `json:"event"`
			}
			if err := dec.Decode(&resp); err != nil {
				return fmt.Errorf("QMP %s: %w", cmd, err)
			}
			switch {
			case resp.Event != "":
				continue
			case resp.Error != nil:
				return fmt.Errorf("QMP %s: %s", cmd, resp.Error.Desc)
			case ret == nil:
				return nil
			default:
				return json.Unmarshal(resp.Return, ret)
			}
		}
	}
	if err := exec("qmp_capabilities", nil, nil); err != nil {
		return err
	}
	return exec(command, args, ret)
}
