package vm

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// A 6.1 guest under TCG, beside a loaded make test, has twice stopped for
// good with its vCPU halted and interrupts on (RFL's IF set, HLT=1, the
// same RIP 10 s apart), in the middle of igb's VF teardown, whose steps
// are timed sleeps (sriov_disable's ssleep(1), igb_disable_sriov's
// msleeps): a timer interrupt that never woke the vCPU. Seen in a guest
// of an emulator, not of a host, it says nothing of the product, and
// killing the guest at its bound lost the whole tier's run. So a guest
// whose console and result stream stay silent for Config.Nudge while its
// vCPU is halted is paused and resumed through QEMU's monitor: resuming
// kicks every vCPU thread and lets QEMU's virtual clock run its due
// timers, the two places a lost wake-up can hide. The guest sees nothing
// but time; each nudge, with the vCPU's registers and LAPIC timer as they
// were, lands in Result.Nudges so the tier's log says it happened.

// DefaultNudge is the silence after which a halted guest is nudged. The
// tier's longest silent step is a bounded wait of its tests of about a
// minute; a nudge of a guest that was only asleep costs it nothing.
const DefaultNudge = 3 * time.Minute

// nudgeCheck is how often Start looks at the guest's output for silence.
func nudgeCheck(nudge time.Duration) time.Duration {
	return min(15*time.Second, nudge/4)
}

// silence follows the size of a guest's console and result stream.
type silence struct {
	files []string
	size  int64
	since time.Time
}

// quietFor says how long the files have not grown, as of now.
func (s *silence) quietFor(now time.Time) time.Duration {
	var size int64
	for _, f := range s.files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	if size != s.size || s.since.IsZero() {
		s.size, s.since = size, now
	}
	return now.Sub(s.since)
}

// nudge pauses and resumes a guest whose vCPU is halted, and says what it
// saw and did; "" when the vCPU was running (a guest busy without output
// is not waiting for a wake-up) or the monitor could not be asked.
func nudge(sock string, quiet time.Duration) string {
	regs, err := qmpHuman(sock, "info registers")
	if err != nil || !strings.Contains(regs, "HLT=1") {
		return ""
	}
	lapic, err := qmpHuman(sock, "info lapic")
	if err != nil {
		lapic = "(no answer: " + err.Error() + ")"
	}
	did := "paused and resumed it"
	if err := qmp(sock, "stop", nil, nil); err != nil {
		did = "could not pause it: " + err.Error()
	} else if err := qmp(sock, "cont", nil, nil); err != nil {
		did = "paused it, could not resume it: " + err.Error()
	}
	return fmt.Sprintf("after %s of silence the vCPU was halted (%s): %s; its LAPIC timer: %s",
		quiet.Round(time.Second), regLine(regs), did, lapicTimer(lapic))
}

// lapicTimer is the timer lines of an "info lapic" dump: LVTT (its mode
// and mask) and Timer (its counts: a current count going down is a timer
// armed), or the dump when it has neither.
func lapicTimer(dump string) string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		// Not LVTTHMR, the thermal sensor's entry.
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "LVTT" || f[0] == "Timer") {
			out = append(out, strings.Join(f, " "))
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(dump)
	}
	return strings.Join(out, "; ")
}
