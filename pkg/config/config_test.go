package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lane.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	l, err := Load(Source{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "sriov" || l.Agents != 2 || l.PFsPerNode != 1 || l.VFsPerPF != 6 ||
		l.VFDriver != "vfio-pci" || l.Resource() != "kubevirt.io/sriov_net" || l.NodeLabel != "sriov_capable=true" ||
		l.CNI != "flannel" || l.APIPort != 6443 || !l.RegistryEnabled() || l.Registry.Address != "127.0.0.1:5000" ||
		l.SysfsRoot != "/sys" || l.StateDir != "/var/lib/sriov-lane" || l.WaitTimeout.Duration != 10*time.Minute {
		t.Fatalf("unexpected defaults: %+v", l)
	}
	if !strings.HasPrefix(l.K3sImage, "rancher/k3s:v1.35.5-k3s1") {
		t.Fatalf("k3s image not pinned to a real release: %s", l.K3sImage)
	}
}

func TestStrictDecodingNamesUnknownField(t *testing.T) {
	p := writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nregistry:\n  adress: 1.2.3.4:5\n")
	_, err := Load(Source{File: p})
	if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), "registry.adress") {
		t.Fatalf("want invalid error naming the unknown field, got %v", err)
	}
}

func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	p := writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nname: fromfile\nagents: 3\nvfsPerPF: 4\napiPort: 7000\n")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := AddFlags(fs)
	if err := fs.Parse([]string{"--agents=5"}); err != nil {
		t.Fatal(err)
	}
	l, err := Load(Source{File: p, Flags: fl, Getenv: env(map[string]string{
		"SRIOV_LANE_AGENTS": "4", "SRIOV_LANE_VFS_PER_PF": "2", "CLUSTER_NAME": "kv", "HOST_PORT": "7443",
		"SRIOV_LANE_API_PORT": "8443", "PF_BLACKLIST": "eno1 eno2",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if l.Agents != 5 { // flag beats env and file
		t.Errorf("agents = %d, want 5", l.Agents)
	}
	if l.VFsPerPF != 2 { // env beats file
		t.Errorf("vfsPerPF = %d, want 2", l.VFsPerPF)
	}
	if l.Name != "kv" { // kubevirtci's CLUSTER_NAME beats the file
		t.Errorf("name = %q, want kv", l.Name)
	}
	if l.APIPort != 8443 { // SRIOV_LANE_* beats kubevirtci's HOST_PORT
		t.Errorf("apiPort = %d, want 8443", l.APIPort)
	}
	if strings.Join(l.PFs.Exclude, ",") != "eno1,eno2" {
		t.Errorf("exclude = %v", l.PFs.Exclude)
	}
	if l.PFsPerNode != 1 { // default survives
		t.Errorf("pfsPerNode = %d", l.PFsPerNode)
	}
}

func TestValidationRejectsBadInput(t *testing.T) {
	cases := map[string]string{
		"name":                "name: Bad_Name\n",
		"agents":              "agents: -1\n",
		"pfsPerNode":          "pfsPerNode: -2\n",
		"vfsPerPF":            "vfsPerPF: 1000\n",
		"vfDriver":            "vfDriver: igb_uio\n",
		"cni":                 "cni: weave\n",
		"apiPort":             "apiPort: 70000\n",
		"registry":            "registry:\n  address: nowhere\n",
		"nodeLabel":           "nodeLabel: novalue\n",
		"volumes[0]":          "volumes: [\"relative:/x@agent:*\"]\n",
		"waitTimeout":         "waitTimeout: -1s\n",
		"resourcePrefix":      "resourcePrefix: Not_A_Domain\n",
		"sysfsRoot":           "sysfsRoot: sys\n",
		"apiVersion":          "apiVersion: v2\n",
		"imageRegistryMirror": "imageRegistryMirror: ftp://mirror:5000\n",
	}
	for field, body := range cases {
		t.Run(field, func(t *testing.T) {
			if !strings.HasPrefix(body, "apiVersion") {
				body = "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\n" + body
			} else {
				body += "kind: Lane\n"
			}
			_, err := Load(Source{File: writeFile(t, body)})
			if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), field) {
				t.Fatalf("want invalid error naming %s, got %v", field, err)
			}
		})
	}
}

// The device plugin refuses a resourceName with '.', and kubelet one longer
// than 63 characters or not starting and ending with a letter or digit
// (validate.go resNameRE).
func TestResourceNameIsTheDevicePluginsAndKubeletsRule(t *testing.T) {
	for name, ok := range map[string]bool{
		"sriov_net": true, "sriov-net-2": true, "a": true, strings.Repeat("a", 63): true,
		"sriov.net": false, "_sriov": false, "sriov-": false, strings.Repeat("a", 64): false, "sriov/net": false,
	} {
		body := "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nresourceName: \"" + name + "\"\n"
		_, err := Load(Source{File: writeFile(t, body)})
		if ok && err != nil {
			t.Errorf("resourceName %q refused: %v", name, err)
		}
		if !ok && (err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), "resourceName")) {
			t.Errorf("resourceName %q: %v, want an invalid error naming resourceName", name, err)
		}
	}
}

func TestImageRegistryMirrorForms(t *testing.T) {
	for m, ok := range map[string]bool{
		"mirror.example:5000":        true,
		"http://10.0.0.5:5000":       true,
		"https://mirror.example/":    true,
		"https://mirror.example/pro": false, // a path: k3s's API root, the images' prefix
		"mirror.example:5000/v2":     false,
		"[fd00::1]:5000":             true,
		"ftp://mirror":               false,
		"http://":                    false,
		"mirror:99999":               false,
		"Bad_Host":                   false,
	} {
		err := checkMirror(m)
		if (err == nil) != ok {
			t.Errorf("checkMirror(%q) = %v, want ok=%t", m, err, ok)
		}
	}
	for _, m := range []string{"https://mirror.example/pro", "mirror.example:5000/v2/"} {
		if err := checkMirror(m); err == nil || !strings.Contains(err.Error(), "at the host's root") {
			t.Errorf("checkMirror(%q) = %v, want it to say the registry must be at the host's root", m, err)
		}
	}
}

func TestBadEnvAndMissingFile(t *testing.T) {
	if _, err := Load(Source{Getenv: env(map[string]string{"SRIOV_LANE_AGENTS": "two"})}); err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), "SRIOV_LANE_AGENTS") {
		t.Fatalf("bad env: %v", err)
	}
	if _, err := Load(Source{File: "/nonexistent/lane.yaml"}); err == nil || !IsInvalid(err) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	l := Default()
	l.Volumes = []string{"/data:/data:ro@agent:*"}
	b, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back Lane
	if err := DecodeStrict(b, &back); err != nil {
		t.Fatalf("plan output does not decode strictly: %v\n%s", err, b)
	}
	if err := Validate(&back); err != nil {
		t.Fatal(err)
	}
	if back.WaitTimeout != l.WaitTimeout || back.Volumes[0] != l.Volumes[0] {
		t.Fatalf("round trip lost data: %+v", back)
	}
}

func TestParseVolume(t *testing.T) {
	v, err := ParseVolume("/a:/b:ro@agent:*;server:0")
	if err != nil || v.Host != "/a" || v.Container != "/b" || !v.ReadOnly || len(v.NodeFilters) != 2 {
		t.Fatalf("%+v %v", v, err)
	}
	if _, err := ParseVolume("/a:/b@nodes"); err == nil {
		t.Fatal("bad filter accepted")
	}
}

const laneHead = "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\n"

// The YAML library reads a stream's first document and drops the rest: a
// second lane config in the file must be refused, not silently ignored.
func TestMultiDocumentFileRefused(t *testing.T) {
	cases := []struct{ body, want string }{
		{laneHead + "name: first\n---\n" + laneHead + "name: second\n", "document 2 (line 5): a lane config holds one document; found 2"},
		{laneHead + "name: a\n---\nname: b\n---\nname: c\n", "document 2 (line 5): a lane config holds one document; found 3"},
		{"---\n" + laneHead + "---\n---\nagents: 3\n", "document 3 (line 6): a lane config holds one document; found 2"},
	}
	for _, c := range cases {
		p := writeFile(t, c.body)
		_, err := Load(Source{File: p})
		if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), p+": "+c.want) {
			t.Errorf("%q: want an invalid-input error saying %q after the file name, got %v", c.body, c.want, err)
		}
	}
}

// Empty documents (a stray `---` at either end, or doubled) hold no
// settings: they are skipped, and the one document with content is read
// wherever it stands.
func TestEmptyDocumentsTolerated(t *testing.T) {
	for _, body := range []string{
		laneHead + "name: one\n---\n",
		"---\n" + laneHead + "name: one\n---\n# nothing here\n---\n",
		"---\n---\n" + laneHead + "name: one\n",
		"# a comment\n---\n\n---\n" + laneHead + "name: one\nregistry:\n  enabled: false\n---\n",
	} {
		l, err := Load(Source{File: writeFile(t, body)})
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if l.Name != "one" {
			t.Errorf("%q: name %q, want one: the document with content was not the one read", body, l.Name)
		}
	}
	p := writeFile(t, "---\n---\n"+laneHead+"registry:\n  adress: x\n")
	if _, err := Load(Source{File: p}); err == nil || !strings.Contains(err.Error(), "registry.adress") {
		t.Errorf("unknown field after leading empty documents: %v", err)
	}
}
