// Package kubevirtci lays out a minimal kubevirtci checkout for tests and
// drives hack/kubevirtci/provider.sh through it the way kubevirtci's
// cluster-up scripts do.
//
// The scripts are this project's own, written from what kubevirtci's
// cluster-up/ does with a provider, read in kubevirt/kubevirtci at
// 39bd4947ba4de7f7676ad30cd2df51e7c60efb1b (Ref):
//
//   - up.sh, down.sh: source hack/common.sh, then the provider; call up / down.
//   - kubectl.sh: set -e; source hack/common.sh, the provider, hack/config.sh;
//     call _kubectl "$@".
//   - ssh.sh: the same sources; _ssh_into_node "$@" when KUBEVIRT_PROVIDER
//     matches kind.* or k3d.*, else ${_cli} --prefix $provider_prefix ssh "$@".
//   - cli.sh: ${_cli} --prefix $provider_prefix "$@".
//   - kubeconfig.sh: prints ${KUBEVIRTCI_CONFIG_PATH}/$KUBEVIRT_PROVIDER/.kubeconfig.
//   - hack/common.sh: KUBEVIRTCI_CONFIG_PATH defaults to <checkout>/_ci-configs
//     (exported), KUBEVIRT_NUM_NODES to 1 (not exported), provider_prefix is
//     the provider name, and the provider's config directory is created.
//   - hack/config.sh: unsets docker_prefix master_ip network_provider
//     kubeconfig manifest_docker_prefix, applies hack/config-default.sh
//     (docker_prefix=${DOCKER_PREFIX:-kubevirt}, master_ip=192.168.200.2,
//     network_provider=flannel), sources
//     config-provider-${KUBEVIRT_PROVIDER}.sh when it exists, exports them.
//
// config-dump.sh is the harness's own: it sources what kubectl.sh sources
// and prints the variables a consumer sees, one NAME=VALUE a line.
package kubevirtci

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// Ref is the kubevirtci commit the scripts follow.
const Ref = "kubevirt/kubevirtci@39bd4947ba4de7f7676ad30cd2df51e7c60efb1b"

// ConfigVars are the variables hack/config.sh hands its callers, plus the
// kubectl the kind providers write.
var ConfigVars = []string{"master_ip", "kubeconfig", "kubectl", "docker_prefix", "manifest_docker_prefix", "network_provider"}

// Tree is a kubevirtci checkout at Root with the provider installed as
// cluster-up/cluster/<Provider>/provider.sh.
type Tree struct {
	Root     string
	Provider string
}

var scripts = map[string]string{
	"hack/common.sh": `# harness stand-in for kubevirtci's cluster-up/hack/common.sh
if [ -z "$KUBEVIRTCI_PATH" ]; then
    KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/"
fi
if [ -z "$KUBEVIRTCI_CONFIG_PATH" ]; then
    KUBEVIRTCI_CONFIG_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/_ci-configs"
fi
export KUBEVIRTCI_CONFIG_PATH
KUBEVIRTCI_CLUSTER_PATH=${KUBEVIRTCI_CLUSTER_PATH:-${KUBEVIRTCI_PATH}/cluster}
KUBEVIRT_PROVIDER=${KUBEVIRT_PROVIDER:-k8s-1.36}
KUBEVIRT_NUM_NODES=${KUBEVIRT_NUM_NODES:-1}
export KUBEVIRT_PROVIDER
provider_prefix=${KUBEVIRT_PROVIDER}
mkdir -p "$KUBEVIRTCI_CONFIG_PATH/$KUBEVIRT_PROVIDER"
`,
	"hack/config.sh": `# harness stand-in for kubevirtci's cluster-up/hack/config.sh and config-default.sh
unset docker_prefix master_ip network_provider kubeconfig manifest_docker_prefix
docker_prefix=${DOCKER_PREFIX:-kubevirt}
master_ip=192.168.200.2
network_provider=flannel
provider_config="${KUBEVIRTCI_CONFIG_PATH}/$KUBEVIRT_PROVIDER/config-provider-${KUBEVIRT_PROVIDER}.sh"
test -f "$provider_config" && source "$provider_config"
export docker_prefix master_ip network_provider kubeconfig manifest_docker_prefix
`,
	"up.sh": `# harness driver: what kubevirtci's cluster-up/up.sh does with a provider
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
up
`,
	"down.sh": `# harness driver: what kubevirtci's cluster-up/down.sh does with a provider
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
down
`,
	"kubectl.sh": `# harness driver: what kubevirtci's cluster-up/kubectl.sh does with a provider
set -e
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
source "${KUBEVIRTCI_PATH}hack/config.sh"
_kubectl "$@"
`,
	"ssh.sh": `# harness driver: what kubevirtci's cluster-up/ssh.sh does with a provider
set -e
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
test -t 1 && USE_TTY="-it"
source "${KUBEVIRTCI_PATH}hack/common.sh"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
source "${KUBEVIRTCI_PATH}hack/config.sh"
if [ -z "$1" ]; then
    echo "node name required as argument" >&2
    exit 1
fi
if [[ $KUBEVIRT_PROVIDER =~ kind.* ]] || [[ $KUBEVIRT_PROVIDER =~ k3d.* ]]; then
    _ssh_into_node "$@"
else
    ${_cli} --prefix $provider_prefix ssh "$@"
fi
`,
	"cli.sh": `# harness driver: what kubevirtci's cluster-up/cli.sh does with a provider
set -e
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
test -t 1 && USE_TTY="-it"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
source "${KUBEVIRTCI_PATH}hack/config.sh"
${_cli} --prefix $provider_prefix "$@"
`,
	"kubeconfig.sh": `# harness driver: what kubevirtci's cluster-up/kubeconfig.sh prints
set -e
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
echo "${KUBEVIRTCI_CONFIG_PATH}/$KUBEVIRT_PROVIDER/.kubeconfig"
`,
	"config-dump.sh": `# harness driver: the variables hack/config.sh leaves a consumer with
set -e
KUBEVIRTCI_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/"
source "${KUBEVIRTCI_PATH}hack/common.sh"
source "${KUBEVIRTCI_CLUSTER_PATH}/$KUBEVIRT_PROVIDER/provider.sh"
source "${KUBEVIRTCI_PATH}hack/config.sh"
for v in ` + "master_ip kubeconfig kubectl docker_prefix manifest_docker_prefix network_provider" + `; do
    printf '%s=%s\n' "$v" "${!v}"
done
`,
}

// RepoRoot is the sriov-lane checkout this file is in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// NewTree writes the checkout under a new temporary directory and installs
// hack/kubevirtci/provider.sh as provider.
func NewTree(t testing.TB, provider string) *Tree {
	t.Helper()
	root := filepath.Join(t.TempDir(), "kubevirtci")
	for name, body := range scripts {
		writeScript(t, filepath.Join(root, "cluster-up", name), "#!/usr/bin/env bash\n"+body)
	}
	src, err := os.ReadFile(filepath.Join(RepoRoot(), "hack", "kubevirtci", "provider.sh"))
	if err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(root, "cluster-up", "cluster", provider, "provider.sh"), string(src))
	return &Tree{Root: root, Provider: provider}
}

// writeScript writes an executable file, making its directory.
func writeScript(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// ConfigPath is KUBEVIRTCI_CONFIG_PATH as hack/common.sh derives it.
func (tr *Tree) ConfigPath() string { return filepath.Join(tr.Root, "_ci-configs") }

// ProviderDir is where up writes the provider's files.
func (tr *Tree) ProviderDir() string { return filepath.Join(tr.ConfigPath(), tr.Provider) }

// Env is the environment the scripts run with: the caller's, without
// anything kubevirtci or sriov-lane reads, then KUBEVIRT_PROVIDER and extra.
func (tr *Tree) Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "KUBEVIRT") || strings.HasPrefix(name, "SRIOV_LANE") || name == "DOCKER_PREFIX" ||
			name == "CLUSTER_NAME" || name == "HOST_PORT" || strings.HasPrefix(name, "PF_") || name == "ARTIFACTS" ||
			name == "KUBECONFIG" || name == "JOB_NAME" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "KUBEVIRT_PROVIDER="+tr.Provider), extra...)
}

// Result is one script run.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs cluster-up/<script> with args under bash, stdin empty, the way
// a CI job would, and returns its exit code and output.
func (tr *Tree) Run(t testing.TB, env []string, script string, args ...string) Result {
	t.Helper()
	return tr.RunInput(t, env, "", script, args...)
}

// RunInput is Run with stdin.
func (tr *Tree) RunInput(t testing.TB, env []string, stdin, script string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.CommandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(tr.Root, "cluster-up", script)}, args...)...)
	cmd.Dir = tr.Root
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := testutil.ExitCode(t, cmd.Run(), script)
	t.Logf("%s %s -> exit %d\nstdout:\n%s\nstderr:\n%s", script, strings.Join(args, " "), code, out.String(), errb.String())
	return Result{Code: code, Stdout: out.String(), Stderr: errb.String()}
}

// Config sources hack/config.sh as kubectl.sh does and returns ConfigVars.
func (tr *Tree) Config(t testing.TB, env []string) map[string]string {
	t.Helper()
	r := tr.Run(t, env, "config-dump.sh")
	if r.Code != 0 {
		t.Fatalf("config-dump.sh: exit %d", r.Code)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return vars
}
