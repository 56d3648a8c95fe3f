package testutil

import (
	"errors"
	"os/exec"
	"testing"
)

// ExitCode is the exit code of the command what that ended with err (0 for
// nil); an error that is no exit status (the command did not run) fails t.
func ExitCode(t testing.TB, err error, what string) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("running %s: %v", what, err)
	}
	return 0
}
