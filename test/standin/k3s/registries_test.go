package main

import (
	"strings"
	"testing"
)

func TestRegistryHostsAsK3sRendersThem(t *testing.T) {
	got, err := registryHosts([]byte(`mirrors:
  "*":
    endpoint: ["http://172.17.0.1:5055"]
  registry:5000:
    endpoint: ["http://registry:5000"]
  docker.io:
    endpoint: ["mirror.example", "localhost:5001"]
    rewrite: {}
configs: {}
auths: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"_default":      {`[host."http://172.17.0.1:5055/v2"]`},
		"registry:5000": {`server = "https://registry:5000/v2"`, `[host."http://registry:5000/v2"]`},
		"docker.io":     {`server = "https://registry-1.docker.io/v2"`, `[host."https://mirror.example/v2"]`, `[host."http://localhost:5001/v2"]`},
	}
	if len(got) != len(want) {
		t.Fatalf("dirs %v, want %v", got, want)
	}
	for dir, lines := range want {
		body, ok := got[dir]
		if !ok {
			t.Errorf("no %s/hosts.toml", dir)
			continue
		}
		last := -1
		for _, l := range lines {
			i := strings.Index(body, l)
			if i < 0 || i < last {
				t.Errorf("%s/hosts.toml lacks %q (in order):\n%s", dir, l, body)
			}
			last = i
		}
	}
	if strings.Contains(got["_default"], "server =") {
		t.Errorf("_default must not pin a server:\n%s", got["_default"])
	}
}

func TestRegistryHostsRefusesWhatTheStandinDoesNotDo(t *testing.T) {
	for name, yml := range map[string]string{
		"auth":    "configs:\n  r:\n    auth: {username: u}\n",
		"rewrite": "mirrors:\n  docker.io:\n    endpoint: [m]\n    rewrite: {a: b}\n",
	} {
		if _, err := registryHosts([]byte(yml)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// What k3s's getHostConfigs does beyond the plain case (k3s-io/k3s
// pkg/agent/containerd/config.go@v1.35.5+k3s1).
func TestRegistryHostsPathsDuplicatesAndDefaults(t *testing.T) {
	got, err := registryHosts([]byte(`mirrors:
  "*":
    endpoint: ["http://mirror.local:5000/proxy/"]
  quay.io:
    endpoint: ["https://m.example/v2", "https://m.example/v2", "https://quay.io"]
  ghcr.io:
    endpoint: ["%zz", "https://ghcr.io"]
  empty.io:
    endpoint: []
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"_default": hostsHeader + "\n[host.\"http://mirror.local:5000/proxy/\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n",
		// The duplicate is skipped; the last endpoint is the registry itself
		// and so becomes the server, not a host.
		"quay.io": hostsHeader + "server = \"https://quay.io/v2\"\n\n[host.\"https://m.example/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
	}
	// ghcr.io: the invalid endpoint is ignored and the other is the default,
	// so nothing is left to write; empty.io has no endpoint.
	if len(got) != len(want) {
		t.Errorf("dirs %v, want %v", keys(got), keys(want))
	}
	for dir, body := range want {
		if got[dir] != body {
			t.Errorf("%s/hosts.toml =\n%s\nwant\n%s", dir, got[dir], body)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
