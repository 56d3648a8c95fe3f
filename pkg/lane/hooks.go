package lane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// hookEnv is the environment hooks run with: SRIOV_LANE_PFS is where the
// PFs are, as pkg/sriov reads it from the journal, for post-up and pre-down
// hooks alike.
func hookEnv(l *config.Lane, kubeconfig string, placements []sriov.Placement) ([]string, error) {
	pfs, err := json.Marshal(placements)
	if err != nil {
		return nil, fmt.Errorf("rendering SRIOV_LANE_PFS: %w", err)
	}
	return append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		"SRIOV_LANE_NAME="+l.Name,
		"SRIOV_LANE_PFS="+string(pfs),
	), nil
}

// HookTimeout bounds each hook: a hung pre-down hook must not keep PFs away
// from the host forever.
const HookTimeout = 10 * time.Minute

// hookOutputWait is how long a hook's output is still copied after the
// hook exits (exec.Cmd.WaitDelay): children it left running that keep its
// stdout open must not hold up the lane, and ten seconds is ample for the
// last lines of a hook that has finished.
const hookOutputWait = 10 * time.Second

// runHooks runs each hook as argv (no shell), streaming its output.
func runHooks(ctx context.Context, c *Session, phase string, hooks [][]string, kubeconfig string) error {
	env, err := hookEnv(c.Lane, kubeconfig, c.placements())
	if err != nil {
		return err
	}
	for _, h := range hooks {
		c.Log.V(1).Infof("%s hook: %s", phase, strings.Join(h, " "))
		hctx, cancel := context.WithTimeout(ctx, HookTimeout)
		defer cancel()
		cmd := exec.CommandContext(hctx, h[0], h[1:]...)
		cmd.WaitDelay = hookOutputWait
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = c.Out, c.Out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s hook %q: %w", phase, strings.Join(h, " "), err)
		}
	}
	return nil
}
