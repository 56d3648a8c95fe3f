package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/rig"
)

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestKubevirtciProviderHooksAndExport drives the lane the way kubevirtci
// does (hack/kubevirtci/provider.sh up/down), with post-up and pre-down
// hooks, and exports its logs on the way down as a CI job would.
func TestKubevirtciProviderHooksAndExport(t *testing.T) {
	t.Parallel() // own rig, lane names and API port (see TestMain)
	requireRig(t)
	r := rig.NewForTest(t, 2, "rgh")
	l := newLane(t, r, "e2e-h", 16451)
	hookOut := filepath.Join(r.Dir, "post-up.env")
	preDownOut := filepath.Join(r.Dir, "pre-down.env")
	l.cfg.Hooks.PostUp = [][]string{{"/bin/sh", "-c", "env > " + hookOut + "; echo post-up-hook-ran"}}
	l.cfg.Hooks.PreDown = [][]string{{"/bin/sh", "-c", "env > " + preDownOut}}
	writeLane(t, l)

	kv := filepath.Join(r.Dir, "kubevirtci")
	artifacts := filepath.Join(r.Dir, "artifacts")
	provider := func(verb string) string {
		cmd := exec.Command("bash", filepath.Join(repoRoot(t), "hack/kubevirtci/provider.sh"), verb)
		cmd.Env = env("SRIOV_LANE="+binary, "SRIOV_LANE_CONFIG="+l.path, "KUBEVIRT_NUM_NODES=3",
			"KUBEVIRTCI_CONFIG_PATH="+kv, "KUBEVIRT_PROVIDER=k3d-sriov", "ARTIFACTS="+artifacts)
		out, err := cmd.CombinedOutput()
		t.Logf("provider.sh %s:\n%s", verb, out)
		if err != nil {
			t.Fatalf("provider.sh %s: %v", verb, err)
		}
		return string(out)
	}
	out := provider("up")
	if !strings.Contains(out, "post-up-hook-ran") {
		t.Errorf("post-up hook output not streamed")
	}
	hookEnv, err := os.ReadFile(hookOut)
	if err != nil {
		t.Fatalf("post-up hook did not run: %v", err)
	}
	pfsJSON := envValue(string(hookEnv), "SRIOV_LANE_PFS")
	var pfs []map[string]any
	if err := json.Unmarshal([]byte(pfsJSON), &pfs); err != nil || len(pfs) != 2 {
		t.Errorf("SRIOV_LANE_PFS = %q (%v)", pfsJSON, err)
	}
	if !strings.Contains(string(hookEnv), "SRIOV_LANE_NAME=e2e-h") || !strings.Contains(string(hookEnv), "KUBECONFIG=/") {
		t.Errorf("hook environment lacks SRIOV_LANE_NAME or KUBECONFIG")
	}
	dir := filepath.Join(kv, "k3d-sriov")
	for _, f := range []string{".kubeconfig", ".kubectl", "config-provider-k3d-sriov.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("kubevirtci file %s: %v", f, err)
		}
	}
	cp, _ := os.ReadFile(filepath.Join(dir, "config-provider-k3d-sriov.sh"))
	for _, want := range []string{"master_ip=127.0.0.1", "kubeconfig='" + filepath.Join(dir, ".kubeconfig") + "'", "kubectl='"} {
		if !strings.Contains(string(cp), want) {
			t.Errorf("config-provider file lacks %q:\n%s", want, cp)
		}
	}

	provider("down")
	if preDownEnv, err := os.ReadFile(preDownOut); err != nil {
		t.Errorf("pre-down hook did not run: %v", err)
	} else if got := envValue(string(preDownEnv), "SRIOV_LANE_PFS"); got != pfsJSON {
		t.Errorf("pre-down hook's SRIOV_LANE_PFS differs from post-up's:\n%s\n%s", got, pfsJSON)
	}
	for _, f := range []string{"journal.jsonl", "lane.yaml", "nodes.json", "events.txt", "sriov-sysfs.txt",
		"nodes/k3d-e2e-h-agent-0/container.log", "nodes/k3d-e2e-h-agent-0/links.txt"} {
		if _, err := os.Stat(filepath.Join(artifacts, "e2e-h", f)); err != nil {
			t.Errorf("export logs: %s missing: %v", f, err)
		}
	}
	links, _ := os.ReadFile(filepath.Join(artifacts, "e2e-h", "nodes/k3d-e2e-h-agent-0/links.txt"))
	if !strings.Contains(string(links), "rgh") {
		t.Errorf("agent-0's links do not show its PF:\n%s", links)
	}
	for _, f := range []string{".kubeconfig", ".kubectl", "config-provider-k3d-sriov.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("down left kubevirtci file %s", f)
		}
	}
	assertLaneGone(t, r, l, r.State.PFs)
}

func TestFailingPostUpHookUndoesUp(t *testing.T) {
	t.Parallel() // own rig, lane names and API port (see TestMain)
	requireRig(t)
	r := rig.NewForTest(t, 2, "rgf")
	l := newLane(t, r, "e2e-f", 16452)
	l.cfg.Hooks.PostUp = [][]string{{"/bin/sh", "-c", "echo hook-failing; exit 7"}}
	writeLane(t, l)
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
