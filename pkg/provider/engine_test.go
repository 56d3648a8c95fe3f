package provider

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func TestSelectEngine(t *testing.T) {
	if testutil.PodmanSocket != PodmanSocket {
		t.Fatalf("testutil.PodmanSocket = %s, want %s", testutil.PodmanSocket, PodmanSocket)
	}
	for _, tc := range []struct {
		name, setting, dockerHost string
		sockets                   []string
		want                      Engine
		err                       string
	}{
		{name: "DOCKER_HOST wins, engine told later", dockerHost: "unix:///tmp/x.sock", sockets: []string{DockerSocket},
			want: Engine{Host: "unix:///tmp/x.sock"}},
		{name: "DOCKER_HOST with podman asked for", setting: "podman", dockerHost: "unix:///tmp/p.sock",
			want: Engine{Name: "podman", Host: "unix:///tmp/p.sock"}},
		{name: "Docker's socket first", sockets: []string{DockerSocket, PodmanSocket},
			want: Engine{Name: "docker", Host: "unix://" + DockerSocket}},
		{name: "Podman's when Docker's is missing", sockets: []string{PodmanSocket},
			want: Engine{Name: "podman", Host: "unix://" + PodmanSocket}},
		{name: "podman asked for on a host with both", setting: "podman", sockets: []string{DockerSocket, PodmanSocket},
			want: Engine{Name: "podman", Host: "unix://" + PodmanSocket}},
		{name: "docker asked for, socket missing: the connect says so", setting: "docker",
			want: Engine{Name: "docker", Host: "unix://" + DockerSocket}},
		{name: "nothing", err: "no container engine: DOCKER_HOST is not set and neither /var/run/docker.sock nor /run/podman/podman.sock exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "DOCKER_HOST" {
					return tc.dockerHost
				}
				return ""
			}
			exists := func(p string) bool {
				for _, s := range tc.sockets {
					if s == p {
						return true
					}
				}
				return false
			}
			got, err := SelectEngine(tc.setting, getenv, exists)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SelectEngine = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// fakeEngine answers /version and /info as the engine would. The bodies
// carry only the fields Identify reads, as each engine names them:
// Docker's api/types (ServerVersion, SecurityOptions "name=rootless")
// and Podman's (containers/podman pkg/api/handlers/compat/version.go
// @v4.3.1: a "Podman Engine" component beside an "Engine" one, with the
// libpod API version in its details; libpod/info, libpod/define/info.go
// @v4.3.1: host.security.rootless, host.networkBackend).
func fakeEngine(t *testing.T, version, info string) *client.Client {
	t.Helper()
	var asked []string
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///fake.sock"), client.WithVersion("1.41"),
		client.WithHTTPClient(&http.Client{Transport: testutil.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			asked = append(asked, r.URL.Path)
			body := ""
			switch {
			case strings.HasSuffix(r.URL.Path, "/version"):
				body = version
			case strings.HasSuffix(r.URL.Path, "/libpod/info"):
				if !strings.HasPrefix(r.URL.Path, "/v4.3.1/") && !strings.HasPrefix(r.URL.Path, "/v3.4.4/") {
					t.Errorf("libpod info asked at %s, not at the libpod API version /version named", r.URL.Path)
				}
				body = info
			case strings.HasSuffix(r.URL.Path, "/info"):
				body = info
			default:
				t.Errorf("unexpected request %s", r.URL)
			}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestIdentify(t *testing.T) {
	const (
		dockerVersion = `{"Version":"28.2.2","ApiVersion":"1.50","Components":[{"Name":"Engine","Version":"28.2.2"}]}`
		podmanVersion = `{"Version":"4.3.1","ApiVersion":"1.41","Components":[{"Name":"Podman Engine","Version":"4.3.1","Details":{"APIVersion":"4.3.1"}},{"Name":"Engine","Version":"4.3.1"}]}`
		oldPodman     = `{"Version":"3.4.4","ApiVersion":"1.40","Components":[{"Name":"Podman Engine","Version":"3.4.4","Details":{"APIVersion":"3.4.4"}}]}`
	)
	for _, tc := range []struct {
		name, version, info string
		want                EngineInfo
		refused, lack       string
	}{
		{name: "docker", version: dockerVersion, info: `{"SecurityOptions":["name=seccomp,profile=builtin"]}`,
			want: EngineInfo{Name: config.EngineDocker, Version: "28.2.2", APIVersion: "1.50"}},
		{name: "rootless docker", version: dockerVersion, info: `{"SecurityOptions":["name=seccomp,profile=builtin","name=rootless"]}`,
			want: EngineInfo{Name: config.EngineDocker, Version: "28.2.2", APIVersion: "1.50", Rootless: true}, refused: "rootless"},
		{name: "rootful podman", version: podmanVersion, info: `{"host":{"networkBackend":"netavark","security":{"rootless":false}}}`,
			want: EngineInfo{Name: config.EnginePodman, Version: "4.3.1", APIVersion: "1.41", NetworkBackend: "netavark"}},
		{name: "rootful podman on cni", version: podmanVersion, info: `{"host":{"networkBackend":"cni","security":{"rootless":false}}}`,
			want: EngineInfo{Name: config.EnginePodman, Version: "4.3.1", APIVersion: "1.41", NetworkBackend: "cni"}, lack: "dnsname"},
		{name: "rootless podman", version: podmanVersion, info: `{"host":{"networkBackend":"netavark","security":{"rootless":true}}}`,
			want: EngineInfo{Name: config.EnginePodman, Version: "4.3.1", APIVersion: "1.41", NetworkBackend: "netavark", Rootless: true}, refused: "needs the rootful engine"},
		{name: "podman 3", version: oldPodman, info: `{"host":{"networkBackend":"cni","security":{"rootless":false}}}`,
			want: EngineInfo{Name: config.EnginePodman, Version: "3.4.4", APIVersion: "1.40", NetworkBackend: "cni"}, refused: "Podman 3.4.4 is older than 4.0", lack: "dnsname"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Identify(context.Background(), fakeEngine(t, tc.version, tc.info))
			if err != nil || got != tc.want {
				t.Fatalf("Identify = %+v, %v; want %+v", got, err, tc.want)
			}
			if r := got.Refusal(); (tc.refused == "") != (r == "") || !strings.Contains(r, tc.refused) {
				t.Fatalf("Refusal = %q, want one with %q", r, tc.refused)
			}
			if l := got.Lack(); (tc.lack == "") != (l == "") || !strings.Contains(l, tc.lack) {
				t.Fatalf("Lack = %q, want one with %q", l, tc.lack)
			}
		})
	}
}

// down --all may act on a Docker lane, a Podman lane, then a Docker lane
// again: k3d, which takes its engine from DOCKER_HOST, must follow each
// lane, also when the run's client of that engine already exists, and the
// DOCKER_HOST set for one lane must not choose the next lane's engine.
func TestEnginesPointK3dAtEachLanesEngine(t *testing.T) {
	// Other tests of the package point k3d at an engine too: what chooses
	// is the DOCKER_HOST this process was started with.
	if eng, _ := HostEngine(config.EnginePodman); eng.Host != "unix://"+PodmanSocket {
		t.Fatalf("the test process was started with DOCKER_HOST=%s, which chooses every lane's engine: run it without", eng.Host)
	}
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_SOCK", "")
	var e Engines
	defer e.Close()
	for _, engine := range []string{config.EngineDocker, config.EnginePodman, config.EngineDocker} {
		if _, err := e.Client(engine); err != nil {
			t.Fatal(err)
		}
		sock := DockerSocket
		if engine == config.EnginePodman {
			sock = PodmanSocket
		}
		if got := os.Getenv("DOCKER_HOST"); got != "unix://"+sock {
			t.Errorf("after a %s lane: DOCKER_HOST=%q, want unix://%s", engine, got, sock)
		}
		if got := os.Getenv("DOCKER_SOCK"); got != sock {
			t.Errorf("after a %s lane: DOCKER_SOCK=%q, want %s", engine, got, sock)
		}
	}
	if len(e.clis) != 2 {
		t.Errorf("%d clients, want one per engine", len(e.clis))
	}
}
