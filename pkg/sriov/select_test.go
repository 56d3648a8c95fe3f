package sriov_test

import (
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

func TestSelectionAllows(t *testing.T) {
	pf := sriov.PF{Name: "ens1f0", PCI: "0000:3b:00.0"}
	used := pf
	used.DefaultRoute = true
	cases := []struct {
		name string
		sel  sriov.Selection
		pf   sriov.PF
		want bool
	}{
		{"empty selection takes a free PF", sriov.Selection{}, pf, true},
		{"exclude by name", sriov.Selection{Exclude: []string{"ens1f0"}}, pf, false},
		{"exclude by PCI glob", sriov.Selection{Exclude: []string{"0000:3b:*"}}, pf, false},
		{"include by other name leaves it out", sriov.Selection{Include: []string{"ens2*"}}, pf, false},
		{"include glob by name", sriov.Selection{Include: []string{"ens1f*"}}, pf, true},
		{"exclude wins over include", sriov.Selection{Include: []string{"ens1f0"}, Exclude: []string{"0000:3b:00.0"}}, pf, false},
		{"host's default-route PF skipped", sriov.Selection{}, used, false},
		{"host's PF taken when explicitly included", sriov.Selection{Include: []string{"0000:3b:00.0"}}, used, true},
	}
	for _, c := range cases {
		if got, why := c.sel.Allows(c.pf); got != c.want {
			t.Errorf("%s: Allows = %v (%s), want %v", c.name, got, why, c.want)
		}
	}
}

// A PF carrying the host's networking is taken only by its exact name or
// PCI address: a glob written for the spare ports must not cut the host off.
func TestSelectionInUsePFNeedsAnExactInclude(t *testing.T) {
	route := sriov.PF{Name: "ens1f0", PCI: "0000:3b:00.0", Present: true, DefaultRoute: true}
	addr := route
	addr.DefaultRoute, addr.GlobalAddress = false, true
	for _, pf := range []sriov.PF{route, addr} {
		for _, glob := range [][]string{{"ens1f*"}, {"0000:3b:*"}, {"*"}, {"ens1f[0-9]", "0000:3b:00.?"}} {
			ok, why := sriov.Selection{Include: glob}.Allows(pf)
			if ok {
				t.Errorf("%+v: glob include %v takes an in-use PF", pf, glob)
				continue
			}
			for _, want := range []string{"in use by the host", "exact name ens1f0", "PCI address 0000:3b:00.0", "pfs.include"} {
				if !strings.Contains(why, want) {
					t.Errorf("%+v, include %v: reason %q does not say %q", pf, glob, why, want)
				}
			}
		}
		for _, exact := range [][]string{{"ens1f0"}, {"0000:3b:00.0"}, {"ens2*", "ens1f0"}, {"ens1f*", "0000:3b:00.0"}} {
			if ok, why := (sriov.Selection{Include: exact}).Allows(pf); !ok {
				t.Errorf("%+v: exact include %v refused: %s", pf, exact, why)
			}
		}
		if ok, why := (sriov.Selection{Include: []string{"ens1f0"}, Exclude: []string{"ens1f0"}}).Allows(pf); ok || !strings.Contains(why, "pfs.exclude") {
			t.Errorf("%+v: exclude must still win over an exact include: %v %q", pf, ok, why)
		}
	}
	if _, why := (sriov.Selection{}).Allows(route); !strings.Contains(why, "default route") || strings.Contains(why, "global address") {
		t.Errorf("reason %q should name the default route only", why)
	}
	// A PF the host does not use is still taken by a glob.
	free := route
	free.DefaultRoute = false
	if ok, why := (sriov.Selection{Include: []string{"ens1f*"}}).Allows(free); !ok {
		t.Errorf("glob include refused a free PF: %s", why)
	}
}

func TestCollisionNameDeterministic(t *testing.T) {
	a, b := sriov.CollisionName("0000:40:00.0"), sriov.CollisionName("0000:41:00.0")
	if a != sriov.CollisionName("0000:40:00.0") || a == b || len(a) > 15 {
		t.Fatalf("collision names %q %q: want stable, distinct, <= 15 chars", a, b)
	}
}
