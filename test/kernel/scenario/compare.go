package scenario

import (
	"fmt"
	"sort"
	"strings"
)

// Diff is one difference between two transcripts: in a step's op, args or
// result (Key "op", "args", "result"), in one key of its state, or a step
// one has and the other lacks (Key "step").
type Diff struct {
	Step, Key string
	Real      string
	Fake      string
}

func (d Diff) String() string {
	return fmt.Sprintf("step %q, %s: real %q, fake %q", d.Step, d.Key, d.Real, d.Fake)
}

// Compare lists every difference between a real kernel's transcript and
// the fake's, step by step in order.
func Compare(real, fake *Transcript) []Diff {
	var out []Diff
	n := max(len(real.Steps), len(fake.Steps))
	for i := 0; i < n; i++ {
		if i >= len(real.Steps) || i >= len(fake.Steps) || real.Steps[i].Name != fake.Steps[i].Name {
			var r, f string
			if i < len(real.Steps) {
				r = real.Steps[i].Name
			}
			if i < len(fake.Steps) {
				f = fake.Steps[i].Name
			}
			// The rest cannot be paired up.
			return append(out, Diff{Step: fmt.Sprintf("#%d", i), Key: "step", Real: r, Fake: f})
		}
		rs, fs := real.Steps[i], fake.Steps[i]
		add := func(key, r, f string) {
			if r != f {
				out = append(out, Diff{Step: rs.Name, Key: key, Real: r, Fake: f})
			}
		}
		add("op", rs.Op, fs.Op)
		add("args", strings.Join(rs.Args, " "), strings.Join(fs.Args, " "))
		add("result", rs.Result, fs.Result)
		keys := map[string]bool{}
		for k := range rs.State {
			keys[k] = true
		}
		for k := range fs.State {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			r, rok := rs.State[k]
			f, fok := fs.State[k]
			if !rok {
				r = "<absent>"
			}
			if !fok {
				f = "<absent>"
			}
			add("state "+k, r, f)
		}
	}
	return out
}
