package vm

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/test/bound"
)

// The report's pieces come out of QEMU's dumps and /proc: the registers
// of "info registers", the words of "x/Ngx", the words that can be kernel
// return addresses, and a process's CPU time.
func TestHangReportParts(t *testing.T) {
	regs := "CPU#0\r\nRAX=0000000000000000 RBX=0000000000000001\r\nRIP=ffffffff81001010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\nES =0000 0000000000000000 00000000 00000000\r\n"
	if rip, ok := register(regs, "RIP"); !ok || rip != 0xffffffff81001010 {
		t.Errorf("RIP %#x %v", rip, ok)
	}
	if _, ok := register(regs, "R99"); ok {
		t.Error("found a register the dump lacks")
	}
	if got := regLine(regs); got != "RIP=ffffffff81001010 RFL=00000246 HLT=1" {
		t.Errorf("regLine: %q", got)
	}
	if got, want := generalRegs(regs), "CPU#0\nRAX=0000000000000000 RBX=0000000000000001\nRIP=ffffffff81001010 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1"; got != want {
		t.Errorf("generalRegs:\n%q\nwant\n%q", got, want)
	}
	dump := "ffffc90000123e58: 0xffffffff81001010 0x0000000000000246\r\nffffc90000123e68: 0xffffffffc0a01234 0xffff888004f00000\r\n"
	words := memoryWords(dump)
	if want := []uint64{0xffffffff81001010, 0x246, 0xffffffffc0a01234, 0xffff888004f00000}; !reflect.DeepEqual(words, want) {
		t.Fatalf("memoryWords = %x, want %x", words, want)
	}
	var kernel []uint64
	for _, w := range words {
		if kernelAddress(w) {
			kernel = append(kernel, w)
		}
	}
	// The direct map (0xffff888...) is data, not text.
	if want := []uint64{0xffffffff81001010, 0xffffffffc0a01234}; !reflect.DeepEqual(kernel, want) {
		t.Errorf("kernel addresses %x, want %x", kernel, want)
	}

	// Spinning shows as CPU time however loaded the machine (a bound
	// on the spin's wall time would measure the load).
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(bound.Scaled(time.Minute)); ; {
		now, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 50*time.Millisecond {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a minute of spinning counted as %s of CPU", now-before)
		}
	}
	if _, err := processCPU(-1); err == nil {
		t.Error("CPU time of no process")
	}
}
