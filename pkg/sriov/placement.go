package sriov

import "github.com/sriov-lane/sriov-lane/pkg/journal"

// Placement is one PF in one node: where up (or repair) moved it, under
// which name, and how many VFs it has there.
type Placement struct {
	PF         PF     `json:"pf"`
	Node       string `json:"node"`
	NameInNode string `json:"nameInNode"`
	VFs        int    `json:"vfs"`
}

// Placements answers, from a lane's journal, which PFs are placed where:
// every PF moved into a node and not moved back, in the order they were
// moved, with the VFs created on it. up, repair, down, status, export and
// the hooks all ask it, so they all see the same placements.
func Placements(entries []journal.Entry) []Placement {
	vfs := map[string]int{}
	for _, e := range entries {
		var r NumVFsRecord
		if e.Op == OpNumVFs && e.Done && !e.Undone && e.Decode(&r) == nil {
			vfs[r.PCI] = r.Count
		}
	}
	var out []Placement
	for _, e := range entries {
		var r MoveRecord
		if e.Op != OpMove || e.Undone || e.Decode(&r) != nil || r.Function != "PF" {
			continue
		}
		pf := PF{Name: r.Name, PCI: r.PCI, MAC: r.MAC}
		if r.PF != nil {
			pf = *r.PF
		}
		out = append(out, Placement{PF: pf, Node: r.TargetDesc, NameInNode: r.MovedAs, VFs: vfs[r.PCI]})
	}
	return out
}

// IsPFMove reports whether a journal entry moved a PF (OpMove also moves
// the VF netdevs of netdevice mode).
func IsPFMove(e *journal.Entry) bool {
	var r MoveRecord
	return e.Op == OpMove && e.Decode(&r) == nil && r.Function == "PF"
}
