// Package conformance checks a stand-in against the component it stands in
// for: a table of rows, each an input the product passes (or could pass),
// where upstream's handling of it was read (repo PATH@TAG), what the stand-in
// gives for it, and what upstream gives. A row where the stand-in must
// differ says how and why, and still states what the stand-in gives, so the
// difference cannot grow unseen. The stand-in k3s's table has its own shape
// (a check per argument). flannelcni and localpath keep a copy of this one:
// their modules link only what flannel-io/cni-plugin and
// local-path-provisioner link, and importing this package would bring the
// main module's versions into them (a module of its own would need a
// replace directive in the product's go.mod, which go install refuses).
package conformance

import (
	"fmt"
	"strings"
	"testing"
)

// Row is one input and what the stand-in must give for it.
type Row struct {
	Src       string // "repo PATH@TAG": where upstream's behaviour was read
	What      string // the input, and what upstream does with it
	Got       func(t *testing.T) string
	Want      string
	Deviation string // "" when the stand-in does what upstream does; else how and why not
}

// Check runs every row as a subtest named for its input.
func Check(t *testing.T, rows []Row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.What, func(t *testing.T) {
			if r.Src == "" || !strings.Contains(r.Src, "@") {
				t.Errorf("no repo PATH@TAG source")
			}
			if got := r.Got(t); got != r.Want {
				msg := fmt.Sprintf("\n  got  %q\n  want %q\n  source %s", got, r.Want, r.Src)
				if r.Deviation != "" {
					msg += "\n  (the stand-in's deviation: " + r.Deviation + ")"
				}
				t.Error(msg)
			}
		})
	}
}
