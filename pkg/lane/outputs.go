package lane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sriov-lane/sriov-lane/pkg/lane/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane/journal"
)

// OpFiles journals files the lane writes outside its state dir (kubevirtci
// outputs), so down removes them.
const OpFiles = "lane.files"

type filesRecord struct {
	Paths []string `json:"paths"`
}

func laneUndoers() journal.Undoers {
	return journal.Undoers{
		OpFiles: func(_ context.Context, e *journal.Entry) (string, error) {
			var r filesRecord
			if err := e.Decode(&r); err != nil {
				return "", err
			}
			for _, p := range r.Paths {
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					return "", fmt.Errorf("removing %s: %w", p, err)
				}
			}
			return "", nil
		},
	}
}

// stepOutputs writes what kubevirtci's cluster-up expects when asked:
// .kubeconfig, .kubectl and config-provider-<name>.sh.
func stepOutputs(ctx context.Context, c *Context) error {
	if c.KubevirtciDir == "" {
		return nil
	}
	dir, err := filepath.Abs(c.KubevirtciDir)
	if err != nil {
		return err
	}
	kc, kubectl := filepath.Join(dir, ".kubeconfig"), filepath.Join(dir, ".kubectl")
	provider := filepath.Join(dir, "config-provider-"+c.Lane.Name+".sh")
	e, err := c.Journal.Begin(OpFiles, filesRecord{Paths: []string{kc, kubectl, provider}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), kc); err != nil {
		return err
	}
	if err := c.Provider.CopyKubectl(ctx, c.Lane.ClusterName(), kubectl); err != nil {
		return err
	}
	if err := os.WriteFile(provider, []byte(kubevirtciProviderConfig(c.Lane, kc, kubectl)), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", provider, err)
	}
	return c.Journal.Done(e)
}

func kubevirtciProviderConfig(l *config.Lane, kubeconfig, kubectl string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by sriov-lane for lane %s\n", l.Name)
	fmt.Fprintf(&b, "master_ip=%s\n", "127.0.0.1")
	fmt.Fprintf(&b, "kubeconfig=%s\n", kubeconfig)
	fmt.Fprintf(&b, "kubectl=%s\n", kubectl)
	if l.RegistryEnabled() {
		_, port, _ := strings.Cut(l.Registry.Address, ":")
		fmt.Fprintf(&b, "docker_prefix=localhost:%s/kubevirt\n", port)
		fmt.Fprintf(&b, "manifest_docker_prefix=registry:5000/kubevirt\n")
	}
	return b.String()
}

// HookEnv is the environment hooks run with.
func hookEnv(l *config.Lane, kubeconfig string, placements []Placement) []string {
	pfs, _ := json.Marshal(placements)
	return append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		"SRIOV_LANE_NAME="+l.Name,
		"SRIOV_LANE_PFS="+string(pfs),
	)
}

// runHooks runs each hook as argv (no shell), streaming its output.
func runHooks(ctx context.Context, c *Context, phase string, hooks [][]string, kubeconfig string, placements []Placement) error {
	for _, h := range hooks {
		c.Status.Detailf("%s hook: %s", phase, strings.Join(h, " "))
		cmd := exec.CommandContext(ctx, h[0], h[1:]...)
		cmd.Env = hookEnv(c.Lane, kubeconfig, placements)
		cmd.Stdout, cmd.Stderr = c.Out, c.Out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s hook %q: %w", phase, strings.Join(h, " "), err)
		}
	}
	return nil
}

func stepPostUpHooks(ctx context.Context, c *Context) error {
	return runHooks(ctx, c, "post-up", c.Lane.Hooks.PostUp, c.Kubeconfig, c.Placements)
}
