package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Main(args, IOStreams{In: strings.NewReader(""), Out: &out, Err: &out})
	return code, out.String()
}

func TestVersionNamesK3dLibrary(t *testing.T) {
	code, out := runCLI(t, "version", "-o", "json")
	var v VersionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Go == "" || v.Version == "" {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--no-such-flag"},
		{"plan", "--agents", "0"},
		{"plan", "-o", "xml"},
		{"version", "extra-arg"},
		{"plan", "--config", "/nonexistent/lane.yaml"},
		{"up", "--kubevirtci", "/", "--state-dir", "/nonexistent/never-created"},
	} {
		if code, out := runCLI(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
}

func TestPlanConfigOnlyIsDefaulted(t *testing.T) {
	code, out := runCLI(t, "plan", "--config-only", "--state-dir", t.TempDir(), "--agents", "3")
	if code != 0 || !strings.Contains(out, "agents: 3") || !strings.Contains(out, "vfsPerPF: 6") || !strings.Contains(out, "apiVersion: sriov-lane.io/v1alpha1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRoot(IOStreams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("command %s has no --help examples", c.Name())
		}
	}
}

// plan with cni calico works offline: nothing is downloaded, and the
// pinned manifests that are not cached are named with their digests.
func TestPlanCalicoOffline(t *testing.T) {
	state := t.TempDir()
	code, out := runCLI(t, "plan", "--cni", "calico", "--state-dir", state, "--sysfs-root", t.TempDir())
	for _, want := range []string{
		"# not cached: up fetches https://raw.githubusercontent.com/projectcalico/calico/v3.32.1/manifests/operator-crds.yaml (sha256 192f8b2d934ef24b62e86b7e1a6e1762d1c8af26a916f78057bc13fa5ed60f71, 3046956 bytes)",
		"manifests/tigera-operator.yaml (sha256 f18e073794207d372606bc3ea6f8fd73972f86d6828f4ba666dfe0d4aa8ab07f",
		"kind: Installation",
		"containerIPForwarding: Enabled",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	if code != 0 || strings.Contains(out, "kube-flannel") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out = runCLI(t, "plan", "--cni", "calico", "--state-dir", state, "--sysfs-root", t.TempDir(), "-o", "json")
	var doc struct {
		Fetch []struct{ URL, SHA256 string } `json:"fetch"`
	}
	if i := strings.Index(out, "{"); code != 0 || i < 0 || json.Unmarshal([]byte(out[i:]), &doc) != nil || len(doc.Fetch) != 2 {
		t.Fatalf("json plan: exit %d, fetch %+v:\n%s", code, doc.Fetch, out)
	}
}
