package e2e

import (
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func TestFailingPostUpHookUndoesUp(t *testing.T) {
	parallelOnRig(t)
	// One agent: the hook and the undo are the point.
	_, r, l := rigLane(t, 1, func(c *config.Lane) {
		c.Agents = 1
		c.Hooks.PostUp = [][]string{{"/bin/sh", "-c", "echo hook-failing; exit 7"}}
	})
	res := run(t, nil, "up", "--config", l.path)
	if res.code != 1 || !strings.Contains(res.output, "post-up hook") || !strings.Contains(res.output, "✓ undo") {
		t.Fatalf("exit %d, want 1 with the hook named and an undo", res.code)
	}
	assertLaneGone(t, r, l, r.State.PFs)
}

// envValue is the value of name in env's output.
func envValue(env, name string) string {
	for _, line := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
	}
	return ""
}
