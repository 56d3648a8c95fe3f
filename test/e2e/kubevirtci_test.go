package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/docexample"
	"github.com/sriov-lane/sriov-lane/test/kubevirtci"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// TestKubevirtciDropIn installs hack/kubevirtci/provider.sh into a
// kubevirtci checkout (test/kubevirtci) and uses the lane only through
// cluster-up's scripts, as a KubeVirt developer would: up.sh, hack/config.sh,
// kubectl.sh, ssh.sh, cli.sh, down.sh, with a CI job's post-up and
// pre-down hooks and ARTIFACTS, where down exports the lane's logs. The
// provider is named unlike the lane, so the config file must follow the
// provider's name.
func TestKubevirtciDropIn(t *testing.T) {
	parallelOnRig(t)
	s, r, l := rigLane(t, 2, nil)
	server0, agent0, agent1 := "k3d-"+l.cfg.Name+"-server-0", "k3d-"+l.cfg.Name+"-agent-0", "k3d-"+l.cfg.Name+"-agent-1"
	// The registry is optional in the rig (make test-env builds its
	// stand-in only when it can); with it, docker_prefix and _port registry
	// are checked against the real container.
	registryPort := strconv.Itoa(s.Port(t))
	_, err := docker(t).ImageInspect(context.Background(), testutil.StandinRegistryImage)
	withRegistry := err == nil
	if withRegistry {
		on := true
		l.cfg.Registry.Enabled, l.cfg.Registry.Address, l.cfg.Registry.Image = &on, "127.0.0.1:"+registryPort, testutil.StandinRegistryImage
		writeLane(t, l)
	} else {
		t.Logf("no %s: the lane runs without a registry", testutil.StandinRegistryImage)
	}

	// A CI job's hooks, and ARTIFACTS for the logs down exports.
	hookOut := filepath.Join(r.Dir, "post-up.env")
	preDownOut := filepath.Join(r.Dir, "pre-down.env")
	l.cfg.Hooks.PostUp = [][]string{{"/bin/sh", "-c", "env > " + hookOut + "; echo post-up-hook-ran"}}
	l.cfg.Hooks.PreDown = [][]string{{"/bin/sh", "-c", "env > " + preDownOut}}
	writeLane(t, l)
	artifacts := filepath.Join(r.Dir, "artifacts")

	// The kubevirtci page's commands, run as written: its provider and
	// node count; its lane.yaml is the rig's.
	exported := docexample.Lookup(t, "export KUBEVIRT_PROVIDER=k3d-sriov KUBEVIRT_NUM_NODES=3 SRIOV_LANE_CONFIG=$PWD/lane.yaml")
	vars := map[string]string{}
	for _, kv := range exported.Args[1:] {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	tr := kubevirtci.NewTree(t, vars["KUBEVIRT_PROVIDER"])
	env := func(extra ...string) []string {
		return tr.Env(append([]string{"SRIOV_LANE=" + binary, "SRIOV_LANE_CONFIG=" + l.path, "KUBEVIRT_NUM_NODES=" + vars["KUBEVIRT_NUM_NODES"], "ARTIFACTS=" + artifacts}, extra...)...)
	}
	script := func(e docexample.Example) (string, []string) {
		t.Helper()
		dir, name := filepath.Split(e.Args[0])
		if dir != "cluster-up/" || len(e.Env) > 0 {
			t.Fatalf("%s: not a cluster-up script", e)
		}
		return name, e.Args[1:]
	}
	up, upArgs := script(docexample.Lookup(t, "cluster-up/up.sh"))
	res := tr.Run(t, env(), up, upArgs...)
	if res.Code != 0 {
		t.Fatalf("up.sh: exit %d", res.Code)
	}
	if !strings.Contains(res.Stdout+res.Stderr, "post-up-hook-ran") {
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
	if !strings.Contains(string(hookEnv), "SRIOV_LANE_NAME="+l.cfg.Name) || !strings.Contains(string(hookEnv), "KUBECONFIG=/") {
		t.Errorf("hook environment lacks SRIOV_LANE_NAME or KUBECONFIG")
	}
	dir := tr.ProviderDir()
	for _, f := range []string{".kubeconfig", ".kubectl", "config-provider-k3d-sriov.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("up wrote no %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "config-provider-"+l.cfg.Name+".sh")); err == nil {
		t.Errorf("up wrote the config under the lane's name, which hack/config.sh never sources")
	}

	// hack/config.sh: every variable, and DOCKER_PREFIX over both prefixes.
	want := map[string]string{
		"master_ip": "127.0.0.1", "kubeconfig": filepath.Join(dir, ".kubeconfig"), "kubectl": filepath.Join(dir, ".kubectl"),
		"docker_prefix": "kubevirt", "manifest_docker_prefix": "kubevirt", "network_provider": "flannel",
	}
	if withRegistry {
		want["docker_prefix"], want["manifest_docker_prefix"] = "localhost:"+registryPort+"/kubevirt", "registry:5000/kubevirt"
	}
	checkVars := func(what string, got map[string]string) {
		t.Helper()
		for _, k := range kubevirtci.ConfigVars {
			if got[k] != want[k] {
				t.Errorf("%s: %s=%q, want %q", what, k, got[k], want[k])
			}
		}
	}
	checkVars("hack/config.sh", tr.Config(t, env()))
	want["docker_prefix"], want["manifest_docker_prefix"] = "quay.io/me/kv", "quay.io/me/kv"
	checkVars("hack/config.sh with DOCKER_PREFIX", tr.Config(t, env("DOCKER_PREFIX=quay.io/me/kv")))

	// kubectl.sh: .kubectl is the server's k3s run as kubectl, a whole
	// kubectl (the stand-in links k8s.io/kubectl in, as k3s does), with the
	// lane's kubeconfig: it lists the lane's nodes, and a command only a
	// whole kubectl knows (apply) works too.
	kubectl, kubectlArgs := script(docexample.Lookup(t, "cluster-up/kubectl.sh get nodes"))
	res = tr.Run(t, env(), kubectl, kubectlArgs...)
	for _, n := range []string{server0, agent0, agent1} {
		if res.Code != 0 || !strings.Contains(res.Stdout, n+" ") {
			t.Errorf("kubectl.sh get nodes: exit %d, %s not listed\n%s", res.Code, n, res.Stderr)
		}
	}
	// Run as kubectl, k3s first extracts its data dir; .kubectl points it
	// into the lane dir, which down removes (assertLaneGone), not at
	// /var/lib/rancher/k3s.
	if _, err := os.Lstat(filepath.Join(l.cfg.Dir().KubectlData(), "data", "current")); err != nil {
		t.Errorf("kubectl.sh left no k3s data dir in the lane dir: %v", err)
	}
	cm := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(cm, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kubectl-sh-apply\n  namespace: default\ndata:\n  a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := tr.Run(t, env(), "kubectl.sh", "apply", "-f", cm); res.Code != 0 || !strings.Contains(res.Stdout, "configmap/kubectl-sh-apply created") {
		t.Errorf("kubectl.sh apply: exit %d, %q %q", res.Code, res.Stdout, res.Stderr)
	}

	// ssh.sh: by container (= node) name and by kubevirtci's node01...
	for node, container := range map[string]string{
		agent0: agent0, "node01": server0, "node03": agent1,
	} {
		res := tr.Run(t, env(), "ssh.sh", node, "hostname")
		if res.Code != 0 || strings.TrimSpace(res.Stdout) != container {
			t.Errorf("ssh.sh %s hostname: exit %d, %q, want %s", node, res.Code, res.Stdout, container)
		}
	}
	// ...a command line for the node's shell, as with ssh: the agents hold the PFs.
	ssh, sshArgs := script(docexample.Lookup(t, "cluster-up/ssh.sh node02 'ls /sys/class/net'"))
	res = tr.Run(t, env(), ssh, sshArgs...)
	if res.Code != 0 || !strings.Contains(res.Stdout, r.State.Prefix) {
		t.Errorf("ssh.sh node02: exit %d, no %s PF in agent-0: %q", res.Code, r.State.Prefix, res.Stdout)
	}
	// ...and a shell reading stdin when no command is given.
	res = tr.RunInput(t, env(), "hostname\n", "ssh.sh", "node01")
	if res.Code != 0 || strings.TrimSpace(res.Stdout) != server0 {
		t.Errorf("ssh.sh node01 (shell): exit %d, %q", res.Code, res.Stdout)
	}

	// cli.sh, kubevirtci's gocli entry point: ssh and ports.
	if res := tr.Run(t, env(), "cli.sh", "ssh", "node02", "hostname"); strings.TrimSpace(res.Stdout) != agent0 {
		t.Errorf("cli.sh ssh node02 hostname: exit %d, %q", res.Code, res.Stdout)
	}
	if res := tr.Run(t, env(), "cli.sh", "ports", "k8s"); strings.TrimSpace(res.Stdout) != strconv.Itoa(l.cfg.APIPort) {
		t.Errorf("cli.sh ports k8s: exit %d, %q", res.Code, res.Stdout)
	}
	if withRegistry {
		if res := tr.Run(t, env(), "cli.sh", "ports", "registry"); strings.TrimSpace(res.Stdout) != registryPort {
			t.Errorf("cli.sh ports registry: exit %d, %q", res.Code, res.Stdout)
		}
	}

	down, downArgs := script(docexample.Lookup(t, "cluster-up/down.sh"))
	if res := tr.Run(t, env(), down, downArgs...); res.Code != 0 {
		t.Errorf("down.sh: exit %d", res.Code)
	}
	if preDownEnv, err := os.ReadFile(preDownOut); err != nil {
		t.Errorf("pre-down hook did not run: %v", err)
	} else if got := envValue(string(preDownEnv), "SRIOV_LANE_PFS"); got != pfsJSON {
		t.Errorf("pre-down hook's SRIOV_LANE_PFS differs from post-up's:\n%s\n%s", got, pfsJSON)
	}
	// down exported the lane's logs into ARTIFACTS before it went.
	for _, f := range []string{"journal.jsonl", "lane.yaml", "nodes.json", "events.txt", "sriov-sysfs.txt",
		"nodes/" + agent0 + "/container.log", "nodes/" + agent0 + "/links.txt"} {
		if _, err := os.Stat(filepath.Join(artifacts, l.cfg.Name, f)); err != nil {
			t.Errorf("export logs: %s missing: %v", f, err)
		}
	}
	links, _ := os.ReadFile(filepath.Join(artifacts, l.cfg.Name, "nodes", agent0, "links.txt"))
	if !strings.Contains(string(links), r.State.Prefix) {
		t.Errorf("agent-0's links do not show its PF:\n%s", links)
	}
	for _, f := range []string{".kubeconfig", ".kubectl", "config-provider-k3d-sriov.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("down left %s (%v)", f, err)
		}
	}
	assertLaneGone(t, r, l, r.State.PFs)
}
