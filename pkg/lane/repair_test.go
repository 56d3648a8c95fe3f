package lane

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// repairLane is a lane up took as far as its components on a fake host
// (kept with --retain): every PF in its agent with its VFs, which sysfs
// shows as up made them. It is opened as repair opens a lane.
func repairLane(t *testing.T) (*Session, *upHost, *bytes.Buffer) {
	t.Helper()
	l := config.Default()
	l.StateDir, l.SysfsRoot = t.TempDir(), t.TempDir()
	h := newUpHost(l, "deploy")
	if _, err := upOnFakes(t, l, h, true); err == nil {
		t.Fatal("up on the fake host did not stop at deploy")
	}
	for _, pf := range h.pfs[:l.PFsNeeded()] {
		setNumVFs(t, l, pf, l.VFsPerPF)
	}
	h.events = nil
	var out bytes.Buffer
	c := &Session{Lane: l, Journal: h.j, Log: log.NewPrinter(&out, true), Provider: h, SRIOV: h, undoers: h.undoers(), kubeFor: h.kubeFor, Out: &out}
	return c, h, &out
}

func setNumVFs(t *testing.T, l *config.Lane, pf sriov.PF, n int) {
	t.Helper()
	sys := sriov.Sysfs{Root: l.SysfsRoot}
	if err := os.MkdirAll(sys.Device(pf.PCI), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys.Device(pf.PCI), "sriov_numvfs"), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// redo is what repair does to an agent: up's share of it undone, newest
// first, then done again into the running container.
func redo(agent string, pf sriov.PF, vfs int) []string {
	return []string{
		"undo VFs on " + pf.PCI, "undo move " + pf.Name, "undo pin " + agent,
		"prepare " + agent, "pin " + agent, "move " + pf.Name + " into " + agent, strconv.Itoa(vfs) + " VFs on " + pf.Name,
	}
}

// Repair of each kind of damage status reports: what it can mend, it mends
// by redoing up's share of that agent alone; what it cannot, it refuses
// before changing anything, saying what to do.
func TestRepairAgentsMendsEachDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(c *Session, h *upHost)
		// agent is the one repaired (0 or 1), -1 for none.
		agent   int
		wantErr string
	}{
		{name: "healthy", damage: func(*Session, *upHost) {}, agent: -1},
		{name: "agent restarted, its PF in the old netns", agent: 0, damage: func(_ *Session, h *upHost) {
			h.located = map[string]sriov.Where{h.pfs[0].MAC: {InPin: true, AgentMoved: true}}
		}},
		{name: "PF back on the host after a reboot", agent: 0, damage: func(_ *Session, h *upHost) {
			h.located = map[string]sriov.Where{h.pfs[0].MAC: {}}
		}},
		{name: "VFs removed by a job", agent: 1, damage: func(c *Session, h *upHost) {
			setNumVFs(t, c.Lane, h.pfs[1], 0)
		}},
		{name: "agent not running", agent: -1, wantErr: "agent k3d-sriov-agent-0 is not running: start it (docker start k3d-sriov-agent-0), then run 'sriov-lane repair --name sriov'", damage: func(_ *Session, h *upHost) {
			h.located = map[string]sriov.Where{h.pfs[0].MAC: {AgentDown: true}}
		}},
		{name: "agent gone", agent: -1, wantErr: "agent k3d-sriov-agent-1 is gone (container removed); its PF waits in the pinned netns, and a lane cannot get the agent back: run 'sriov-lane down --name sriov', then up", damage: func(_ *Session, h *upHost) {
			h.agents = h.agents[:1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, h, out := repairLane(t)
			tc.damage(c, h)
			before := sriov.Placements(c.Journal.Entries())
			repaired, err := repairAgents(context.Background(), c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("repair: %v\n%s", err, out)
			}
			var want, wantRepaired []string
			if tc.agent >= 0 {
				a := h.agents[tc.agent].Name
				want, wantRepaired = redo(a, h.pfs[tc.agent], c.Lane.VFsPerPF), []string{a}
			}
			if !slices.Equal(h.events, want) {
				t.Errorf("repair did\n  %s\nwant\n  %s", strings.Join(h.events, "\n  "), strings.Join(want, "\n  "))
			}
			if !slices.Equal(repaired, wantRepaired) {
				t.Errorf("repaired %v, want %v", repaired, wantRepaired)
			}
			// Every PF is placed in the same agent as before, with its VFs.
			placed := func(ps []sriov.Placement) map[string]string {
				m := map[string]string{}
				for _, p := range ps {
					m[p.PF.PCI] = p.Node + " " + strconv.Itoa(p.VFs)
				}
				return m
			}
			if got, was := placed(sriov.Placements(c.Journal.Entries())), placed(before); !maps.Equal(got, was) {
				t.Errorf("placements after repair %v, want them as before: %v", got, was)
			}
		})
	}
}
