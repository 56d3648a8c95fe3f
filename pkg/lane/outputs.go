package lane

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// kubevirtciRef pins the kubevirtci sources the kubevirtci outputs follow.
const kubevirtciRef = "kubevirt/kubevirtci@39bd4947ba4de7f7676ad30cd2df51e7c60efb1b"

// stepOutputs writes what kubevirtci's cluster-up expects when asked:
// .kubeconfig, .kubectl and config-provider-<provider>.sh.
func stepOutputs(ctx context.Context, c *Session) error {
	if c.KubevirtciDir == "" {
		return nil
	}
	dir, err := filepath.Abs(c.KubevirtciDir)
	if err != nil {
		return err
	}
	name, err := kubevirtciProviderName(dir)
	if err != nil {
		return err
	}
	kc, kubectl := filepath.Join(dir, ".kubeconfig"), filepath.Join(dir, ".kubectl")
	provider := filepath.Join(dir, "config-provider-"+name+".sh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kc, func(p string) error {
		return c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	// k3s's multi-call binary is kubectl only when run under that very name;
	// kubevirtci runs it as .kubectl. The binary goes into the lane dir
	// (removed with the lane) and .kubectl is a wrapper that runs it.
	bin := c.Lane.Dir().Kubectl()
	if err := writeOutsideFile(c, bin, func(p string) error {
		return c.Provider.CopyKubectl(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kubectl, func(p string) error {
		return writeExecutable(p, kubectlWrapper(bin))
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

// kubevirtciProviderName is the provider the --kubevirtci directory belongs
// to. kubevirtci keeps a provider's files in
// ${KUBEVIRTCI_CONFIG_PATH}/${KUBEVIRT_PROVIDER}/ and its hack/config.sh
// sources config-provider-${KUBEVIRT_PROVIDER}.sh from there
// (kubevirt/kubevirtci cluster-up/hack/config.sh, cluster-up/hack/common.sh
// at kubevirtciRef), so the directory's last element is the provider name.
func kubevirtciProviderName(dir string) (string, error) {
	name := filepath.Base(filepath.Clean(dir))
	if name == "" || name == "." || name == ".." || name == string(filepath.Separator) {
		return "", fmt.Errorf("--kubevirtci %q: want kubevirtci's per-provider directory, ${KUBEVIRTCI_CONFIG_PATH}/${KUBEVIRT_PROVIDER}", dir)
	}
	return name, nil
}

// CheckKubevirtciDir refuses a --kubevirtci directory that names no
// provider, before up changes anything.
func CheckKubevirtciDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	_, err = kubevirtciProviderName(abs)
	return err
}

// kubectlWrapper is the .kubectl kubevirtci runs: it starts bin (a file
// named kubectl) with the caller's arguments.
func kubectlWrapper(bin string) string {
	return "#!/bin/sh\n" +
		"# written by sriov-lane: k3s's multi-call binary acts as kubectl only under that name\n" +
		"exec " + shellQuote(bin) + ` "$@"` + "\n"
}

func writeExecutable(p, body string) error {
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	// WriteFile keeps the mode of a file it replaces, and umask applies.
	if err := os.Chmod(p, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

// kubevirtciProviderConfig is config-provider-<provider>.sh. hack/config.sh
// unsets, then exports, docker_prefix, master_ip, network_provider,
// kubeconfig and manifest_docker_prefix; the kind providers also write
// kubectl (kubevirt/kubevirtci cluster-up/hack/config.sh and
// cluster-up/cluster/kind/common.sh prepare_config at kubevirtciRef). As
// theirs do, the file leaves DOCKER_PREFIX to override both image prefixes
// when it is sourced. Every value is quoted: the file is shell.
func kubevirtciProviderConfig(l *config.Lane, kubeconfig, kubectl string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by sriov-lane for lane %s; kubevirtci's hack/config.sh sources it (%s)\n", l.Name, kubevirtciRef)
	b.WriteString("master_ip=127.0.0.1\n")
	fmt.Fprintf(&b, "kubeconfig=%s\n", shellQuote(kubeconfig))
	fmt.Fprintf(&b, "kubectl=%s\n", shellQuote(kubectl))
	push, manifest := "kubevirt", "kubevirt"
	if l.RegistryEnabled() {
		// Pushed to from the host; pulled by nodes under the registry's alias
		// on the cluster network.
		push = registryHostPrefix(l.Registry.Address) + "/kubevirt"
		manifest = provider.RegistryAlias + ":5000/kubevirt"
	} else {
		b.WriteString("# no lane registry (registry.enabled: false): images come from DOCKER_PREFIX\n")
	}
	fmt.Fprintf(&b, "docker_prefix=${DOCKER_PREFIX:-%s}\n", shellQuote(push))
	fmt.Fprintf(&b, "manifest_docker_prefix=${DOCKER_PREFIX:-%s}\n", shellQuote(manifest))
	fmt.Fprintf(&b, "network_provider=%s\n", shellQuote(l.CNI))
	return b.String()
}

// registryHostPrefix is HOST:PORT to push to the lane registry from the
// host; a loopback or wildcard address becomes localhost, which Docker
// trusts without TLS (kind's docker_prefix is localhost:PORT too).
func registryHostPrefix(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "localhost", "127.0.0.1", "0.0.0.0", "::":
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// hookEnv is the environment hooks run with: SRIOV_LANE_PFS is where the
// PFs are, as pkg/sriov reads it from the journal, for post-up and pre-down
// hooks alike.
func hookEnv(l *config.Lane, kubeconfig string, placements []sriov.Placement) []string {
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
func runHooks(ctx context.Context, c *Session, phase string, hooks [][]string, kubeconfig string) error {
	placements := c.placements()
	for _, h := range hooks {
		c.Progress.Detailf("%s hook: %s", phase, strings.Join(h, " "))
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

func stepPostUpHooks(ctx context.Context, c *Session) error {
	return runHooks(ctx, c, "post-up", c.Lane.Hooks.PostUp, c.Kubeconfig)
}

// shellQuote single-quotes s for a file kubevirtci sources.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// OpFile journals one file written outside the lane's state dir; its undo
// restores what it replaced (kept in the lane dir) or removes it.
const OpFile = "lane.file"

func laneUndoers() journal.Undoers {
	return journal.Undoers{OpFile: undoFile, OpHostSysctls: undoHostSysctls}
}

type fileRecord struct {
	Path   string `json:"path"`
	Backup string `json:"backup,omitempty"`
}

// writeOutsideFile writes path through write. Inside the lane dir nothing is
// journalled (down removes the dir); elsewhere the write is journalled first
// and an existing file (e.g. ~/.kube/config) is backed up for the undo.
func writeOutsideFile(c *Session, path string, write func(string) error) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if c.Lane.Dir().Holds(abs) {
		return write(abs)
	}
	rec := fileRecord{Path: abs}
	if _, err := os.Stat(abs); err == nil {
		rec.Backup = c.Lane.Dir().Backup(abs)
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
