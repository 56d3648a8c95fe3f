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
		"auth":          "configs:\n  r:\n    auth: {username: u}\n",
		"rewrite":       "mirrors:\n  docker.io:\n    endpoint: [m]\n    rewrite: {a: b}\n",
		"override path": "mirrors:\n  docker.io:\n    endpoint: [\"https://m/proxy\"]\n",
	} {
		if _, err := registryHosts([]byte(yml)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
