package kubevirtci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLane stands in for the sriov-lane binary: it logs its argv and, for
// up, writes the files `sriov-lane up --kubevirtci DIR` writes, with a
// .kubectl that logs its argv too.
const fakeLane = `#!/usr/bin/env bash
{ printf 'sriov-lane'; printf ' [%s]' "$@"; printf '\n'; } >>"$FAKE_LOG"
if [[ "$1" == up ]]; then
    dir=
    while (($#)); do
        if [[ "$1" == --kubevirtci ]]; then dir="$2"; fi
        shift
    done
    mkdir -p "$dir"
    cat >"$dir/.kubeconfig" <<EOF
apiVersion: v1
clusters:
- cluster:
    server: https://127.0.0.1:16999
  name: k3d-fake
current-context: k3d-fake
EOF
    cat >"$dir/.kubectl" <<'EOF'
#!/bin/sh
{ printf 'kubectl'; printf ' [%s]' "$@"; printf '\n'; } >>"$FAKE_LOG"
echo "NAME STATUS"
EOF
    chmod +x "$dir/.kubectl"
    printf "kubeconfig='%s'\nsriov_lane_engine='%s'\n" "$dir/.kubeconfig" "${FAKE_ENGINE:-docker}" >"$dir/config-provider-$(basename "$dir").sh"
fi
`

// fakeEngine logs its argv and answers port as Docker and Podman do.
const fakeEngine = `#!/usr/bin/env bash
{ printf '%s' "$(basename "$0")"; printf ' [%s]' "$@"; printf '\n'; } >>"$FAKE_LOG"
if [[ "$1" == port ]]; then
    echo "127.0.0.1:5123"
    echo "[::1]:5123"
fi
`

type fakes struct {
	log, lane, bin string
}

func newFakes(t *testing.T) *fakes {
	dir := t.TempDir()
	f := &fakes{log: filepath.Join(dir, "calls.log"), lane: filepath.Join(dir, "sriov-lane"), bin: filepath.Join(dir, "bin")}
	writeScript(t, f.lane, fakeLane)
	writeScript(t, filepath.Join(f.bin, "docker"), fakeEngine)
	writeScript(t, filepath.Join(f.bin, "podman"), fakeEngine)
	return f
}

func (f *fakes) env(tr *Tree, extra ...string) []string {
	return tr.Env(append([]string{"FAKE_LOG=" + f.log, "SRIOV_LANE=" + f.lane, "SRIOV_LANE_CONFIG=/cfg/lane.yaml",
		"PATH=" + f.bin + ":" + os.Getenv("PATH")}, extra...)...)
}

// calls returns the calls logged since the last time and forgets them.
func (f *fakes) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(f.log)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func wantCalls(t *testing.T, f *fakes, want ...string) {
	t.Helper()
	got := f.calls(t)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n got  %q\n want %q", got, want)
	}
}

// TestKubevirtciScriptsCallProvider runs each cluster-up driver against the
// provider with a stand-in sriov-lane and docker: no root, no Docker.
func TestKubevirtciScriptsCallProvider(t *testing.T) {
	f := newFakes(t)
	tr := NewTree(t, "k3d-sriov")
	dir := tr.ProviderDir()

	// hack/common.sh defaults KUBEVIRT_NUM_NODES to 1: no SR-IOV agent.
	if r := tr.Run(t, f.env(tr), "up.sh"); r.Code == 0 || !strings.Contains(r.Stderr, "KUBEVIRT_NUM_NODES must be a number >= 2") {
		t.Errorf("up.sh with kubevirtci's default of 1 node: exit %d, want a failure naming KUBEVIRT_NUM_NODES", r.Code)
	}
	wantCalls(t, f)

	if r := tr.Run(t, f.env(tr, "KUBEVIRT_NUM_NODES=3"), "up.sh"); r.Code != 0 {
		t.Fatalf("up.sh: exit %d", r.Code)
	}
	wantCalls(t, f, "sriov-lane [up] [--config] [/cfg/lane.yaml] [--agents] [2] [--kubevirtci] ["+dir+"]")

	if r := tr.Run(t, f.env(tr), "kubeconfig.sh"); strings.TrimSpace(r.Stdout) != filepath.Join(dir, ".kubeconfig") {
		t.Errorf("kubeconfig.sh printed %q", r.Stdout)
	}
	if vars := tr.Config(t, f.env(tr)); vars["kubeconfig"] != filepath.Join(dir, ".kubeconfig") {
		t.Errorf("hack/config.sh did not source config-provider-k3d-sriov.sh: %v", vars)
	}

	r := tr.Run(t, f.env(tr), "kubectl.sh", "get", "nodes", "-o", "wide")
	if r.Code != 0 || !strings.Contains(r.Stdout, "NAME") {
		t.Errorf("kubectl.sh get nodes: exit %d, stdout %q", r.Code, r.Stdout)
	}
	wantCalls(t, f, "kubectl [--kubeconfig="+filepath.Join(dir, ".kubeconfig")+"] [get] [nodes] [-o] [wide]")

	shell := "[if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh]"
	for _, c := range []struct {
		script string
		args   []string
		want   string
	}{
		// Node names are container names, as with kind.
		{"ssh.sh", []string{"k3d-fake-agent-0", "cat", "/etc/hostname"}, "docker [exec] [-i] [k3d-fake-agent-0] [sh] [-c] [cat /etc/hostname]"},
		// kubevirtci's node01.. name the server, then the agents.
		{"ssh.sh", []string{"node01", "--", "ls /sys/class/net | wc -l"}, "docker [exec] [-i] [k3d-fake-server-0] [sh] [-c] [ls /sys/class/net | wc -l]"},
		{"ssh.sh", []string{"node03"}, "docker [exec] [-i] [k3d-fake-agent-1] [sh] [-c] " + shell},
		{"cli.sh", []string{"ssh", "node02", "true"}, "docker [exec] [-i] [k3d-fake-agent-0] [sh] [-c] [true]"},
	} {
		if r := tr.Run(t, f.env(tr), c.script, c.args...); r.Code != 0 {
			t.Errorf("%s %q: exit %d", c.script, c.args, r.Code)
		}
		wantCalls(t, f, c.want)
	}

	if r := tr.Run(t, f.env(tr), "cli.sh", "ports", "registry"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "5123" {
		t.Errorf("cli.sh ports registry: exit %d, %q", r.Code, r.Stdout)
	}
	wantCalls(t, f, "docker [port] [fake-registry] [5000/tcp]")
	if r := tr.Run(t, f.env(tr), "cli.sh", "ports", "k8s"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "16999" {
		t.Errorf("cli.sh ports k8s: exit %d, %q", r.Code, r.Stdout)
	}
	if r := tr.Run(t, f.env(tr), "cli.sh", "provision"); r.Code == 0 || !strings.Contains(r.Stderr, "no gocli") {
		t.Errorf("cli.sh provision: exit %d, want a failure saying there is no gocli", r.Code)
	}
	wantCalls(t, f)

	artifacts := filepath.Join(t.TempDir(), "artifacts")
	if r := tr.Run(t, f.env(tr, "ARTIFACTS="+artifacts), "down.sh"); r.Code != 0 {
		t.Errorf("down.sh: exit %d", r.Code)
	}
	wantCalls(t, f,
		"sriov-lane [export] [logs] [--config] [/cfg/lane.yaml] ["+artifacts+"]",
		"sriov-lane [down] [--config] [/cfg/lane.yaml]")
}

// A provider named neither kind* nor k3d* gets ssh.sh's gocli branch:
// ${_cli} --prefix $provider_prefix ssh NODE.
func TestKubevirtciSSHThroughCliForOtherProviderNames(t *testing.T) {
	f := newFakes(t)
	tr := NewTree(t, "sriov")
	if r := tr.Run(t, f.env(tr, "KUBEVIRT_NUM_NODES=2"), "up.sh"); r.Code != 0 {
		t.Fatalf("up.sh: exit %d", r.Code)
	}
	wantCalls(t, f, "sriov-lane [up] [--config] [/cfg/lane.yaml] [--agents] [1] [--kubevirtci] ["+tr.ProviderDir()+"]")
	if r := tr.Run(t, f.env(tr), "ssh.sh", "node02", "hostname"); r.Code != 0 {
		t.Errorf("ssh.sh: exit %d", r.Code)
	}
	wantCalls(t, f, "docker [exec] [-i] [k3d-fake-agent-0] [sh] [-c] [hostname]")
}

// A lane up on Podman (sriov-lane up recorded sriov_lane_engine=podman in
// the provider's config) is reached through podman, whatever CRI_BIN says
// now.
func TestKubevirtciScriptsUseTheLanesEngine(t *testing.T) {
	f := newFakes(t)
	tr := NewTree(t, "k3d-sriov")
	if r := tr.Run(t, f.env(tr, "KUBEVIRT_NUM_NODES=2", "FAKE_ENGINE=podman"), "up.sh"); r.Code != 0 {
		t.Fatalf("up.sh: exit %d", r.Code)
	}
	wantCalls(t, f, "sriov-lane [up] [--config] [/cfg/lane.yaml] [--agents] [1] [--kubevirtci] ["+tr.ProviderDir()+"]")
	if r := tr.Run(t, f.env(tr, "CRI_BIN=docker"), "ssh.sh", "node02", "hostname"); r.Code != 0 {
		t.Errorf("ssh.sh: exit %d", r.Code)
	}
	wantCalls(t, f, "podman [exec] [-i] [k3d-fake-agent-0] [sh] [-c] [hostname]")
	if r := tr.Run(t, f.env(tr), "cli.sh", "ports", "registry"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "5123" {
		t.Errorf("cli.sh ports registry: exit %d, %q", r.Code, r.Stdout)
	}
	wantCalls(t, f, "podman [port] [fake-registry] [5000/tcp]")
}

// Before up there is no lane to map node01 to: a clear error, no docker call.
func TestKubevirtciSSHBeforeUp(t *testing.T) {
	f := newFakes(t)
	tr := NewTree(t, "k3d-sriov")
	r := tr.Run(t, f.env(tr), "ssh.sh", "node01", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "is the lane up?") {
		t.Errorf("ssh.sh node01 before up: exit %d, want a failure asking whether the lane is up", r.Code)
	}
	wantCalls(t, f)
}
