package lane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// The provider file is sourced by kubevirtci's shell: hostile paths must
// come through as data, never as code.
func TestKubevirtciProviderConfigIsSafeToSource(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "it's $(touch pwned) `x`", ".kubeconfig")
	l := config.Default()
	body := kubevirtciProviderConfig(l, kc, "/k/.kubectl")
	script := filepath.Join(dir, "p.sh")
	os.WriteFile(script, []byte(body), 0o644)
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

func TestCNIOptionsFromLane(t *testing.T) {
	l := config.Default()
	l.NodeLabel = "example.com/sriov=yes"
	l.VFDriver = config.VFDriverNetdevice
	l.ImageRegistryMirror = "mirror.local:5000"
	o := CNIOptions(l, []string{"ens1f0", "ens2f0"})
	if o.NodeSelectorKey != "example.com/sriov" || o.NodeSelectorValue != "yes" || o.VFDriver != "netdevice" ||
		o.ImageRegistryMirror != "mirror.local:5000" || o.Resource() != "kubevirt.io/sriov_net" || len(o.PFNames) != 2 {
		t.Fatalf("%+v", o)
	}
}

func TestPreflightErrorPointsAtCheck(t *testing.T) {
	err := &PreflightError{Failed: []CheckResult{{Name: "pfs", Status: Fail, Message: "no SR-IOV PF", Hint: "get one"}}}
	if !strings.Contains(err.Error(), "sriov-lane check") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatal(err)
	}
}
