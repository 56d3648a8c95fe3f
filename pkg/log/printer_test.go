package log

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// What each call prints, with and without -v: a wrong level or prefix
// shows a user detail they did not ask for, or hides a warning.
func TestPrinterLevels(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		var out bytes.Buffer
		p := NewPrinter(&out, verbose)
		p.Start("step")
		p.Warnf("warn %d", 1)
		p.Errorf("error %d", 2)
		p.V(0).Info("always")
		p.V(1).Infof("detail %d", 3)
		p.End(errors.New("x"))
		got := out.String()
		want := []string{" ! warn 1\n", " ✗ error 2\n", "   always\n", " ✗ step ("}
		if verbose {
			want = append(want, " • step ...\n", "   detail 3\n")
		} else if strings.Contains(got, "detail") || strings.Contains(got, "•") {
			t.Errorf("without -v, detail printed:\n%s", got)
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("verbose=%v: %q missing from:\n%s", verbose, w, got)
			}
		}
		if p.V(1).Enabled() != verbose || !p.V(0).Enabled() {
			t.Errorf("verbose=%v: V(1).Enabled()=%v V(0).Enabled()=%v", verbose, p.V(1).Enabled(), p.V(0).Enabled())
		}
	}
}
