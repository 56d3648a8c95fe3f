package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// envLog is test-env's output: "test-env: " lines, progress on out,
// warnings and errors on errOut, and one timing line per phase.
type envLog struct {
	out, errOut io.Writer
	phase       string
	start       time.Time
}

var _ log.Logger = (*envLog)(nil)

func (l *envLog) Warn(m string)              { fmt.Fprintf(l.errOut, "test-env: WARNING: %s\n", m) }
func (l *envLog) Warnf(f string, a ...any)   { l.Warn(fmt.Sprintf(f, a...)) }
func (l *envLog) Error(m string)             { fmt.Fprintf(l.errOut, "test-env: ERROR: %s\n", m) }
func (l *envLog) Errorf(f string, a ...any)  { l.Error(fmt.Sprintf(f, a...)) }
func (l *envLog) V(log.Level) log.InfoLogger { return envInfo{l} }
func (i envInfo) Info(m string)              { fmt.Fprintf(i.l.out, "test-env: %s\n", m) }
func (i envInfo) Infof(f string, a ...any)   { i.Info(fmt.Sprintf(f, a...)) }
func (envInfo) Enabled() bool                { return true }

// envInfo prints at every level: test-env has no quiet mode.
type envInfo struct{ l *envLog }

// begin ends the phase running, printing its time, and starts name.
func (l *envLog) begin(name string) {
	l.end()
	l.phase, l.start = name, time.Now()
}

// end prints the running phase's time, if one runs.
func (l *envLog) end() {
	if l.phase != "" {
		fmt.Fprintf(l.out, "test-env: phase %-22s %6.1fs\n", l.phase, time.Since(l.start).Seconds())
		l.phase = ""
	}
}
