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

// outputHas checks that out, the output of what, holds each of wants, and
// shows it once if it lacks any.
func outputHas(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	lacks := false
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q", what, want)
			lacks = true
		}
	}
	if lacks {
		t.Logf("%s:\n%s", what, out)
	}
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
		{"load"},
		{"plan", "--config", "/nonexistent/lane.yaml"},
		{"up", "--kubevirtci", "/", "--state-dir", "/nonexistent/never-created"},
	} {
		if code, out := runCLI(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
}

// Every -o refuses a format it does not print before it reads anything:
// exit 2, and the formats it does take.
func TestUnknownOutputFormatIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "use text or json"},
		{[]string{"plan"}, "use yaml or json"},
		{[]string{"check"}, "use text or json"},
		{[]string{"status"}, "use text or json"},
		{[]string{"fleet", "render"}, "use yaml or json"},
		{[]string{"fleet", "pfs"}, "use text or json"},
	} {
		args := append(tc.args, "--state-dir", "/nonexistent/never-created", "-o", "xml")
		switch tc.args[0] {
		case "fleet":
			args = append(tc.args, "--config", "/nonexistent/fleet.yaml", "-o", "xml")
		case "version":
			args = append(tc.args, "-o", "xml")
		}
		code, out := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(out, `unknown output format "xml": `+tc.want) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", args, code, tc.want, out)
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
	outputHas(t, "plan output", out,
		"# not cached: up fetches https://raw.githubusercontent.com/projectcalico/calico/v3.32.1/manifests/operator-crds.yaml (sha256 192f8b2d934ef24b62e86b7e1a6e1762d1c8af26a916f78057bc13fa5ed60f71, 3046956 bytes)",
		"manifests/tigera-operator.yaml (sha256 f18e073794207d372606bc3ea6f8fd73972f86d6828f4ba666dfe0d4aa8ab07f",
		"kind: Installation",
		"containerIPForwarding: Enabled",
	)
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

// plan lists every image the lane pulls, k3s's own included, and with a
// mirror says where the nodes find each: the components' referenced
// through it, k3s's asked for by upstream name (containerd sends them to the
// mirror), both at the mirror rule's path.
func TestPlanListsEveryImage(t *testing.T) {
	state, sys := t.TempDir(), t.TempDir()
	code, out := runCLI(t, "plan", "--images", "--state-dir", state, "--sysfs-root", sys)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"rancher/k3s:v1.35.5-k3s1", "docker.io/rancher/mirrored-pause:3.6", "docker.io/rancher/mirrored-coredns-coredns:1.14.3",
		"docker.io/rancher/local-path-provisioner:v0.0.36", "docker.io/rancher/mirrored-library-busybox:1.37.0",
		"ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick", "ghcr.io/flannel-io/flannel:v0.28.9", "docker.io/library/busybox:1.37.0",
	} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("plan --images lacks %s:\n%s", want, out)
		}
	}

	code, out = runCLI(t, "plan", "-o", "json", "--image-registry-mirror", "http://mirror.example:5000", "--state-dir", state, "--sysfs-root", sys)
	var doc struct {
		Images []struct{ Upstream, Ref, Mirror, PulledBy, For string } `json:"images"`
	}
	if i := strings.Index(out, "{"); code != 0 || i < 0 || json.Unmarshal([]byte(out[i:]), &doc) != nil {
		t.Fatalf("json plan: exit %d:\n%s", code, out)
	}
	by := map[string]struct{ Upstream, Ref, Mirror, PulledBy, For string }{}
	for _, img := range doc.Images {
		by[img.Upstream] = img
	}
	if c := by["docker.io/rancher/mirrored-coredns-coredns:1.14.3"]; c.Ref != c.Upstream || c.Mirror != "mirror.example:5000/rancher/mirrored-coredns-coredns:1.14.3" || c.PulledBy != "nodes" {
		t.Errorf("CoreDNS: %+v", c)
	}
	if m := by["ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick"]; m.Ref != "mirror.example:5000/k8snetworkplumbingwg/multus-cni:v4.3.0-thick" || m.Ref != m.Mirror {
		t.Errorf("multus: %+v", m)
	}
	if k := by["rancher/k3s:v1.35.5-k3s1"]; k.PulledBy != "host" || k.Mirror != "" {
		t.Errorf("node image: %+v", k)
	}

	if code, out := runCLI(t, "plan", "--images", "--config-only"); code != ExitUsage {
		t.Errorf("--images --config-only: exit %d:\n%s", code, out)
	}
}

// plan on a host with no PFs shows placeholder names and says so once,
// though both the image list and the objects take the names.
func TestPlanWarnsOnceOfNoPFs(t *testing.T) {
	code, out := runCLI(t, "plan", "--state-dir", t.TempDir(), "--sysfs-root", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if n := strings.Count(out, "no PFs to select on this host"); n != 1 {
		t.Errorf("the no-PFs warning is printed %d times, want once:\n%s", n, out)
	}
	outputHas(t, "plan output", out, "PF0")
}

// status, repair and reset of a lane this host never brought up (or took
// down) say so, and how to bring it up, in one wording.
func TestCommandsOnNoLaneSayItDoesNotExist(t *testing.T) {
	state := t.TempDir()
	for _, cmd := range []string{"status", "repair", "reset"} {
		code, out := runCLI(t, cmd, "--name", "nolane", "--state-dir", state)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1:\n%s", cmd, code, out)
		}
		outputHas(t, cmd+" output", out, "lane nolane does not exist", "sriov-lane up --name nolane")
	}
}
