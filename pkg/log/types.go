package log

// Level is a verbosity: 0 is always shown, 1 and above under -v.
type Level int32

// Logger is what a package that reports anything takes.
type Logger interface {
	// Warn reports something the user should act on or know, always shown.
	Warn(message string)
	Warnf(format string, args ...any)
	// Error reports a failure that did not stop the run (an undo that
	// could not finish, a cleanup that failed), always shown.
	Error(message string)
	Errorf(format string, args ...any)
	// V gives the info logger of a verbosity: V(0) always, V(1) under -v.
	V(Level) InfoLogger
}

// InfoLogger writes info lines of one verbosity.
type InfoLogger interface {
	Info(message string)
	Infof(format string, args ...any)
	// Enabled says whether lines of this verbosity are shown, for callers
	// whose message costs something to build.
	Enabled() bool
}

// Noop discards everything: the logger of tests and of callers with
// nothing to show.
var Noop Logger = noop{}

type noop struct{}

func (noop) Warn(string)           {}
func (noop) Warnf(string, ...any)  {}
func (noop) Error(string)          {}
func (noop) Errorf(string, ...any) {}
func (noop) V(Level) InfoLogger    { return noop{} }
func (noop) Info(string)           {}
func (noop) Infof(string, ...any)  {}
func (noop) Enabled() bool         { return false }
