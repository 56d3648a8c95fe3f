package lane

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// kubevirtciRef pins the kubevirtci sources the kubevirtci outputs follow.
const kubevirtciRef = "kubevirt/kubevirtci@39bd4947ba4de7f7676ad30cd2df51e7c60efb1b"

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
// named kubectl) with the caller's arguments, its data dir set to dataDir
// (statedir.LaneDir.KubectlData says why).
func kubectlWrapper(bin, dataDir string) string {
	return "#!/bin/sh\n" +
		"# written by sriov-lane: k3s's multi-call binary acts as kubectl only under that name,\n" +
		"# and unpacks what it runs into K3S_DATA_DIR (else /var/lib/rancher/k3s)\n" +
		"K3S_DATA_DIR=" + shellQuote(dataDir) + " exec " + shellQuote(bin) + ` "$@"` + "\n"
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
	// Not kubevirtci's: the engine CLI the drop-in's ssh.sh and ports run
	// on the lane's containers (hack/kubevirtci/provider.sh), the one the
	// lane went up on whatever CRI_BIN says later.
	fmt.Fprintf(&b, "sriov_lane_engine=%s\n", shellQuote(l.EngineCLI()))
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

// shellQuote single-quotes s for a file kubevirtci sources.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
