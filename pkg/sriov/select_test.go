package sriov_test

import (
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

func TestCollisionNameDeterministic(t *testing.T) {
	a, b := sriov.CollisionName("0000:40:00.0"), sriov.CollisionName("0000:41:00.0")
	if a != sriov.CollisionName("0000:40:00.0") || a == b || len(a) > 15 {
		t.Fatalf("collision names %q %q: want stable, distinct, <= 15 chars", a, b)
	}
}
