package testutil

import (
	"strings"
	"testing"
)

// Slots held at once give prefix-free names and distinct ports, within the
// limits the names have.
func TestSlotsHandOutPrefixFreeNamesAndDistinctPorts(t *testing.T) {
	held := []*Slot{TakeSlot(t), TakeSlot(t), TakeSlot(t)}
	var names []string
	ports := map[int]bool{}
	for _, s := range held {
		names = append(names, s.RigPrefix(), s.Lane(0), s.Lane(9))
		for range portsPerSlot {
			p := s.Port(t)
			if ports[p] || p < portBase || p >= portBase+slots*portsPerSlot {
				t.Errorf("port %d handed out twice or outside the slots' range", p)
			}
			ports[p] = true
		}
	}
	for i, a := range names {
		for j, b := range names {
			if i != j && strings.HasPrefix(b, a) {
				t.Errorf("%q is a prefix of %q", a, b)
			}
		}
	}
	// The longest VF netdev name a rig of the last slot makes (PF 9, VF
	// 255) must fit IFNAMSIZ - 1.
	last := &Slot{n: slots - 1}
	if vf := last.RigPrefix() + "9v255"; len(vf) > 15 {
		t.Errorf("VF netdev name %q has %d bytes, more than 15", vf, len(vf))
	}
	if l := "k3d-" + last.Lane(9) + "-agent-15"; len(last.Lane(9)) > 32 || len(l) > 63 {
		t.Errorf("lane name %q too long", last.Lane(9))
	}
}
