package lane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/lane/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane/journal"
)

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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kc, func(p string) error {
		return c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kubectl, func(p string) error {
		return c.Provider.CopyKubectl(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	return writeOutsideFile(c, provider, func(p string) error {
		if err := os.WriteFile(p, []byte(kubevirtciProviderConfig(c.Lane, kc, kubectl)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		return nil
	})
}

func kubevirtciProviderConfig(l *config.Lane, kubeconfig, kubectl string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by sriov-lane for lane %s\n", l.Name)
	fmt.Fprintf(&b, "master_ip=%s\n", "127.0.0.1")
	fmt.Fprintf(&b, "kubeconfig=%s\n", shellQuote(kubeconfig))
	fmt.Fprintf(&b, "kubectl=%s\n", shellQuote(kubectl))
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

// HookTimeout bounds each hook: a hung pre-down hook must not keep PFs away
// from the host forever.
const HookTimeout = 10 * time.Minute

// runHooks runs each hook as argv (no shell), streaming its output.
func runHooks(ctx context.Context, c *Context, phase string, hooks [][]string, kubeconfig string, placements []Placement) error {
	for _, h := range hooks {
		c.Status.Detailf("%s hook: %s", phase, strings.Join(h, " "))
		hctx, cancel := context.WithTimeout(ctx, HookTimeout)
		defer cancel()
		cmd := exec.CommandContext(hctx, h[0], h[1:]...)
		// Children that keep stdout open must not hold up the lane.
		cmd.WaitDelay = 10 * time.Second
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

// shellQuote single-quotes s for a file kubevirtci sources.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// OpFile journals one file written outside the lane's state dir; its undo
// restores what it replaced (kept in the lane dir) or removes it.
const OpFile = "lane.file"

func laneUndoers() journal.Undoers { return journal.Undoers{OpFile: undoFile} }

type fileRecord struct {
	Path   string `json:"path"`
	Backup string `json:"backup,omitempty"`
}

// writeOutsideFile writes path through write. Inside the lane dir nothing is
// journalled (down removes the dir); elsewhere the write is journalled first
// and an existing file (e.g. ~/.kube/config) is backed up for the undo.
func writeOutsideFile(c *Context, path string, write func(string) error) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if strings.HasPrefix(abs, c.Lane.LaneDir()+string(filepath.Separator)) {
		return write(abs)
	}
	rec := fileRecord{Path: abs}
	if _, err := os.Stat(abs); err == nil {
		rec.Backup = filepath.Join(c.Lane.LaneDir(), "backup-"+strings.ReplaceAll(strings.TrimPrefix(abs, "/"), "/", "_"))
	}
	e, err := c.Journal.Begin(OpFile, rec)
	if err != nil {
		return err
	}
	if rec.Backup != "" {
		if err := copyFile(abs, rec.Backup); err != nil {
			return fmt.Errorf("backing up %s before replacing it: %w", abs, err)
		}
	}
	if err := write(abs); err != nil {
		return err
	}
	return c.Journal.Done(e)
}

func undoFile(_ context.Context, e *journal.Entry) (string, error) {
	var r fileRecord
	if err := e.Decode(&r); err != nil {
		return "", err
	}
	if r.Backup != "" {
		if _, err := os.Stat(r.Backup); err == nil {
			b, err := os.ReadFile(r.Backup)
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(r.Path, b, 0o600); err != nil {
				return "", fmt.Errorf("restoring %s: %w", r.Path, err)
			}
			os.Remove(r.Backup)
			return "restored " + r.Path, nil
		}
		// Backup never made: the file was never replaced.
		return "", nil
	}
	if err := os.Remove(r.Path); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("removing %s: %w", r.Path, err)
	}
	return "", nil
}
