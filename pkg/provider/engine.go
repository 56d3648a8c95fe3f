package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Podman, the one place that says what the lane relies on from the engine
// and how rootful Podman 4.3.1 (the version make test runs, and k3d's
// tested one) does it; docs/podman.md has the same for users. Every call
// goes through Podman's Docker-compatible API, as k3d's do.
//   - What it is: /version names a "Podman Engine" component
//     (containers/podman pkg/api/handlers/compat/version.go@v4.3.1);
//     /libpod/info has host.security.rootless and host.networkBackend
//     (libpod/define/info.go@v4.3.1). Identify reads both.
//   - A node's PID and netns: State.Pid of the compatible inspect, as
//     Docker's; pkg/containerns opens /proc/PID/ns/net the same way.
//   - Networks: no default bridge network, so nothing joins one (the lane
//     registry joins the cluster's named network, registry.go); node names
//     resolve through aardvark-dns with netavark, through CNI only with
//     the dnsname plugin (EngineInfo.Lack).
//   - Restarts: a restarted node gets a new PID and netns, as on Docker
//     (repair moves PFs from the pin); restart policies do not act after a
//     reboot (docs/source/markdown/options/restart.md@v4.3.1) and
//     podman-restart.service starts only restart-policy=always containers
//     (contrib/systemd/system/podman-restart.service.in@v4.3.1), so the
//     hints name "podman start" (config.Lane.EngineCLI).
//   - tmpfs volumes: a restarted node's tmpfs datastore keeps its data
//     (measured), where Docker's comes back empty; repair reads which
//     happened from the cluster, not from the engine.
//   - Exec, labels, image inspect and load: the compatible API's; short
//     names are stored as localhost/NAME and found by the short name.
//   - Init: k3d asks for an init process, which Podman runs as catatonit,
//     a package of its own.

// The engines' own sockets: Docker's default (what the docker CLI and k3d
// use without DOCKER_HOST) and rootful Podman's API service, the path
// podman.socket listens on (k3d-io/k3d docs/usage/advanced/podman.md@v5.9.0;
// kubevirt/kubevirtci cluster-up/cluster/ephemeral-provider-common.sh
// KUBEVIRTCI_PODMAN_SOCKET@39bd4947ba4d).
const (
	DockerSocket = "/var/run/docker.sock"
	PodmanSocket = "/run/podman/podman.sock"
)

// Engine is where a lane's node containers live: the engine the lane asked
// for and the address of its Docker-compatible API.
type Engine struct {
	// Name is config.EngineDocker or config.EnginePodman; "" when neither
	// was asked for and DOCKER_HOST named the address: Identify tells.
	Name string
	// Host is the API's address, as DOCKER_HOST takes it.
	Host string
}

// SelectEngine finds the engine of a lane whose containerEngine is setting:
// DOCKER_HOST when set (for either engine, as for k3d and the docker CLI),
// else the asked-for engine's own socket; unset, Docker's socket when it
// exists, else rootful Podman's. kubevirtci picks between the two the same
// way but tries Podman first (kubevirt/kubevirtci hack/detect_cri.sh
// @39bd4947ba4d): a host with both keeps Docker here unless told (CRI_BIN).
func SelectEngine(setting string, getenv func(string) string, exists func(string) bool) (Engine, error) {
	if h := getenv("DOCKER_HOST"); h != "" {
		return Engine{Name: setting, Host: h}, nil
	}
	switch setting {
	case config.EngineDocker:
		return Engine{Name: setting, Host: "unix://" + DockerSocket}, nil
	case config.EnginePodman:
		return Engine{Name: setting, Host: "unix://" + PodmanSocket}, nil
	}
	switch {
	case exists(DockerSocket):
		return Engine{Name: config.EngineDocker, Host: "unix://" + DockerSocket}, nil
	case exists(PodmanSocket):
		return Engine{Name: config.EnginePodman, Host: "unix://" + PodmanSocket}, nil
	}
	return Engine{}, fmt.Errorf("no container engine: DOCKER_HOST is not set and neither %s nor %s exists; start Docker (systemctl start docker) or Podman's API socket (systemctl enable --now podman.socket), or set DOCKER_HOST", DockerSocket, PodmanSocket)
}

// userDockerHost is DOCKER_HOST as the process was started with it. Use
// sets DOCKER_HOST for k3d, so a later lane of the same run (down --all)
// must not take that for the user's choice.
var userDockerHost = os.Getenv("DOCKER_HOST")

// HostEngine is SelectEngine on the user's DOCKER_HOST and this host's
// file system.
func HostEngine(setting string) (Engine, error) {
	getenv := func(k string) string {
		if k == "DOCKER_HOST" {
			return userDockerHost
		}
		return os.Getenv(k)
	}
	return SelectEngine(setting, getenv, func(p string) bool { _, err := os.Stat(p); return err == nil })
}

// Connect makes a client of the engine's API and points the k3d library
// at the same engine (Use). A command run makes one client per engine and
// shares it; the caller closes it.
func (e Engine) Connect() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("connecting to the container engine at %s: %w", e.Host, err)
	}
	if err := e.Use(); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// Use points the k3d library at the engine, for the lane acted on next:
// k3d makes its own clients from DOCKER_HOST (through the docker CLI's
// options, k3d-io/k3d pkg/runtimes/docker/util.go GetDockerClient@v5.9.0)
// and mounts DOCKER_SOCK into its tools node (pkg/runtimes/docker/docker.go
// GetRuntimePath@v5.9.0), and has no other way to be told. A run acting on
// lanes of both engines (down --all) calls it for each lane, not once per
// client.
func (e Engine) Use() error {
	if err := os.Setenv("DOCKER_HOST", e.Host); err != nil {
		return err
	}
	if sock, ok := strings.CutPrefix(e.Host, "unix://"); ok {
		return os.Setenv("DOCKER_SOCK", sock)
	}
	return nil
}

// EngineInfo is what Identify learns of the engine behind a client.
type EngineInfo struct {
	// Name is config.EngineDocker or config.EnginePodman.
	Name string
	// Version is the engine's own release (Docker's or Podman's).
	Version string
	// APIVersion is the Docker API version it serves.
	APIVersion string
	// Rootless says the engine runs as a user, not root.
	Rootless bool
	// NetworkBackend is Podman's: netavark or cni ("" for Docker).
	NetworkBackend string
}

// String names the engine as check shows it.
func (i EngineInfo) String() string {
	name := "Docker"
	if i.Name == config.EnginePodman {
		name = "Podman"
	}
	s := fmt.Sprintf("%s %s, API %s", name, i.Version, i.APIVersion)
	if i.Rootless {
		s += ", rootless"
	}
	return s
}

// podmanComponent is the component Podman's compat /version names itself
// with (containers/podman pkg/api/handlers/compat/version.go@v4.3.1).
const podmanComponent = "Podman Engine"

// Identify asks the engine what it is. Podman answers Docker's /version
// with a "Podman Engine" component (containers/podman
// pkg/api/handlers/compat/version.go@v4.3.1) and tells whether it is
// rootless and its network backend in its own /libpod/info
// (libpod/define/info.go HostInfo@v4.3.1); rootless, Docker lists
// "name=rootless" among its security options.
func Identify(ctx context.Context, cli *client.Client) (EngineInfo, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the engine at %s its version: %w", cli.DaemonHost(), err)
	}
	info := EngineInfo{Name: config.EngineDocker, Version: v.Version, APIVersion: v.APIVersion}
	libpodAPI := ""
	for _, c := range v.Components {
		if c.Name == podmanComponent {
			info.Name, info.Version = config.EnginePodman, c.Version
			libpodAPI = c.Details["APIVersion"]
		}
	}
	if info.Name == config.EnginePodman {
		host, err := podmanHost(ctx, cli, libpodAPI)
		info.Rootless, info.NetworkBackend = host.Security.Rootless, host.NetworkBackend
		return info, err
	}
	sys, err := cli.Info(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the engine at %s for its info: %w", cli.DaemonHost(), err)
	}
	info.Rootless = dockerRootless(sys)
	return info, nil
}

func dockerRootless(sys system.Info) bool {
	return slices.ContainsFunc(sys.SecurityOptions, func(o string) bool {
		return slices.Contains(strings.Split(o, ","), "name=rootless")
	})
}

// podmanHostInfo is what Identify reads of Podman's /libpod/info host.
type podmanHostInfo struct {
	NetworkBackend string `json:"networkBackend"`
	Security       struct {
		Rootless bool `json:"rootless"`
	} `json:"security"`
}

func podmanHost(ctx context.Context, cli *client.Client, apiVersion string) (podmanHostInfo, error) {
	var body struct {
		Host podmanHostInfo `json:"host"`
	}
	if apiVersion == "" {
		apiVersion = cli.ClientVersion()
	}
	u, err := engineURL(cli, "/v"+apiVersion+"/libpod/info")
	if err != nil {
		return body.Host, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return body.Host, err
	}
	resp, err := cli.HTTPClient().Do(req)
	if err != nil {
		return body.Host, fmt.Errorf("asking Podman at %s for its info: %w", cli.DaemonHost(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return body.Host, fmt.Errorf("asking Podman at %s for its info: %s", cli.DaemonHost(), resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return body.Host, fmt.Errorf("reading Podman's info: %w", err)
	}
	return body.Host, nil
}

// engineURL is path on the client's engine. The client's transport dials
// a unix socket whatever the URL's host, so any host serves there.
func engineURL(cli *client.Client, path string) (string, error) {
	h, err := client.ParseHostURL(cli.DaemonHost())
	if err != nil {
		return "", err
	}
	host := h.Host
	if h.Scheme == "unix" || h.Scheme == "npipe" {
		host = "engine"
	}
	scheme := "http"
	if h.Scheme == "https" {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: host, Path: path}).String(), nil
}

// MinPodmanMajor is the oldest Podman k3d runs on: its Docker API before 4
// lacks what k3d calls (k3d-io/k3d docs/usage/advanced/podman.md@v5.9.0,
// "compatible with Podman v4 and higher"; 4.3.1 is the version it names as
// tested, and Debian 12's).
const MinPodmanMajor = 4

// Refusal says why a lane cannot run on the engine, or "" when it can:
// a lane moves host NICs into its nodes, which a rootless engine's
// containers cannot be given, and k3d needs Podman 4 or later.
func (i EngineInfo) Refusal() string {
	switch {
	case i.Rootless:
		return "the engine runs rootless: a lane moves the host's NICs into its node containers' network namespaces, which needs the rootful engine (Docker's or Podman's as root, " + PodmanSocket + ")"
	case i.Name == config.EnginePodman && majorBelow(i.Version, MinPodmanMajor):
		return fmt.Sprintf("Podman %s is older than %d.0, the oldest k3d runs on", i.Version, MinPodmanMajor)
	}
	return ""
}

// Lack says what the engine lacks that a lane is likely to need, or "":
// k3d's nodes reach the server by its container name, which Podman's
// networks resolve with netavark's aardvark-dns, and with the CNI backend
// only where the dnsname plugin is installed, which Debian 12's podman
// package neither installs nor recommends (without it the agents wait for
// the server forever).
func (i EngineInfo) Lack() string {
	if i.Name == config.EnginePodman && i.NetworkBackend == "cni" {
		return "Podman's network backend is cni: the lane's nodes find the server by name only if the dnsname CNI plugin is installed"
	}
	return ""
}

func majorBelow(version string, major int) bool {
	m, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(m)
	return err != nil || n < major
}
