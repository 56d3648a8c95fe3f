package lane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// sourceKubevirtciConfig sources body as kubevirtci's hack/config.sh does,
// in an environment holding only PATH and env, and returns the variables.
func sourceKubevirtciConfig(t *testing.T, body string, env ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "config-provider-k3d-sriov.sh")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `source "$1" && for v in master_ip kubeconfig kubectl docker_prefix manifest_docker_prefix network_provider; do printf '%s=%s\n' "$v" "${!v}"; done`, "_", p)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing:\n%s\n%v: %s", body, err, out)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return vars
}

// The file carries every variable kubevirtci's kind providers write, and
// DOCKER_PREFIX overrides both image prefixes when it is sourced, as in
// kubevirt/kubevirtci cluster-up/cluster/kind/common.sh prepare_config.
func TestKubevirtciProviderConfigVariables(t *testing.T) {
	l := config.Default()
	l.Registry.Address = "127.0.0.1:5001"
	l.CNI = config.CNICalico
	body := kubevirtciProviderConfig(l, "/ci/_ci-configs/k3d-sriov/.kubeconfig", "/ci/_ci-configs/k3d-sriov/.kubectl")
	want := map[string]string{
		"master_ip":              "127.0.0.1",
		"kubeconfig":             "/ci/_ci-configs/k3d-sriov/.kubeconfig",
		"kubectl":                "/ci/_ci-configs/k3d-sriov/.kubectl",
		"docker_prefix":          "localhost:5001/kubevirt",
		"manifest_docker_prefix": "registry:5000/kubevirt",
		"network_provider":       "calico",
	}
	if got := sourceKubevirtciConfig(t, body); !equalMaps(got, want) {
		t.Errorf("without DOCKER_PREFIX:\n got  %v\n want %v", got, want)
	}
	want["docker_prefix"], want["manifest_docker_prefix"] = "quay.io/me/kv", "quay.io/me/kv"
	if got := sourceKubevirtciConfig(t, body, "DOCKER_PREFIX=quay.io/me/kv"); !equalMaps(got, want) {
		t.Errorf("with DOCKER_PREFIX:\n got  %v\n want %v", got, want)
	}
	// An empty DOCKER_PREFIX counts as unset (${DOCKER_PREFIX:-...}).
	want["docker_prefix"], want["manifest_docker_prefix"] = "localhost:5001/kubevirt", "registry:5000/kubevirt"
	if got := sourceKubevirtciConfig(t, body, "DOCKER_PREFIX="); !equalMaps(got, want) {
		t.Errorf("with DOCKER_PREFIX empty:\n got  %v\n want %v", got, want)
	}
}

func TestKubevirtciProviderConfigWithoutRegistry(t *testing.T) {
	l := config.Default()
	f := false
	l.Registry.Enabled = &f
	body := kubevirtciProviderConfig(l, "/k/.kubeconfig", "/k/.kubectl")
	got := sourceKubevirtciConfig(t, body)
	if got["docker_prefix"] != "kubevirt" || got["manifest_docker_prefix"] != "kubevirt" || got["network_provider"] != "flannel" {
		t.Errorf("no registry: %v", got)
	}
	got = sourceKubevirtciConfig(t, body, "DOCKER_PREFIX=quay.io/me")
	if got["docker_prefix"] != "quay.io/me" || got["manifest_docker_prefix"] != "quay.io/me" {
		t.Errorf("no registry, DOCKER_PREFIX set: %v", got)
	}
}

// The drop-in's ssh.sh and ports run the engine CLI of the lane's
// containers, which it reads from the file: docker for a lane saved
// without an engine, else the one up found.
func TestKubevirtciProviderConfigNamesTheEngine(t *testing.T) {
	l := config.Default()
	for engine, want := range map[string]string{"": "sriov_lane_engine='docker'\n", config.EnginePodman: "sriov_lane_engine='podman'\n"} {
		l.ContainerEngine = engine
		if body := kubevirtciProviderConfig(l, "/k/.kubeconfig", "/k/.kubectl"); !strings.Contains(body, want) {
			t.Errorf("containerEngine %q: no line %q in\n%s", engine, want, body)
		}
	}
}

func TestRegistryHostPrefix(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5000":   "localhost:5000",
		"0.0.0.0:5002":     "localhost:5002",
		":5003":            "localhost:5003",
		"192.168.1.5:5000": "192.168.1.5:5000",
		"[fd00::5]:5000":   "[fd00::5]:5000",
	} {
		if got := registryHostPrefix(addr); got != want {
			t.Errorf("registryHostPrefix(%q) = %q, want %q", addr, got, want)
		}
	}
}

// hack/config.sh sources ${KUBEVIRTCI_CONFIG_PATH}/$KUBEVIRT_PROVIDER/
// config-provider-${KUBEVIRT_PROVIDER}.sh: the name is the directory's.
func TestKubevirtciProviderName(t *testing.T) {
	for dir, want := range map[string]string{
		"/src/kubevirt/_ci-configs/k3d-sriov":   "k3d-sriov",
		"/src/kubevirt/_ci-configs/kind-sriov/": "kind-sriov",
		"/_ci-configs/sriov":                    "sriov",
	} {
		if got, err := kubevirtciProviderName(dir); err != nil || got != want {
			t.Errorf("kubevirtciProviderName(%q) = %q, %v; want %q", dir, got, err, want)
		}
	}
	if got, err := kubevirtciProviderName("/"); err == nil {
		t.Errorf("kubevirtciProviderName(/) = %q, want an error", got)
	}
}

// .kubectl runs the binary under the name kubectl (k3s's multi-call binary
// picks its personality from it) with the caller's arguments untouched and
// K3S_DATA_DIR set to the lane's, whatever the paths hold.
func TestKubectlWrapper(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's $(touch pwned) `x`")
	bin := filepath.Join(dir, "bin", "kubectl")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s|' \"${0##*/}\" \"$K3S_DATA_DIR\" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, ".kubectl")
	// An older file in the way, not executable: replaced and made executable.
	if err := os.WriteFile(wrapper, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "bin", "k3s-data")
	if err := writeExecutable(wrapper, kubectlWrapper(bin, data)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wrapper, "--kubeconfig=/k/.kubeconfig", "get", "nodes", "a b")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(out) != "kubectl|"+data+"|--kubeconfig=/k/.kubeconfig|get|nodes|a b|" {
		t.Errorf("wrapper ran %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the wrapper ran code from its path")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// The provider file is sourced by kubevirtci's shell: hostile paths must
// come through as data, never as code.
func TestKubevirtciProviderConfigIsSafeToSource(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "it's $(touch pwned) `x`", ".kubeconfig")
	l := config.Default()
	body := kubevirtciProviderConfig(l, kc, "/k/.kubectl")
	script := filepath.Join(dir, "p.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `cd "$1" && . ./p.sh && printf '%s|%s|%s|%s' "$kubeconfig" "$kubectl" "$docker_prefix" "$manifest_docker_prefix"`, "_", dir)
	// A DOCKER_PREFIX in the caller's environment would override the file's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(out) != kc+"|/k/.kubectl|localhost:5000/kubevirt|registry:5000/kubevirt" {
		t.Fatalf("sourced values %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("sourcing the provider file ran code from a path")
	}
}
