package provider

import (
	"fmt"

	"github.com/docker/docker/client"
)

// Provider runs lanes' clusters on one Docker daemon.
type Provider struct {
	docker *client.Client
	// importCmd is the argv run in each node to import an image tarball
	// read from stdin (k3s's ctr; tests replace it, the stand-in has no ctr).
	importCmd []string
}

// defaultImportCmd imports a `docker save` stream into the node's
// containerd. k3s's ctr defaults to the k8s.io namespace kubelet uses.
var defaultImportCmd = []string{"ctr", "images", "import", "--all-platforms", "-"}

// Connect makes a client of the Docker daemon the environment names
// (DOCKER_HOST, as k3d itself, which opens its own connections the same
// way). A command run makes one and shares it; the caller closes it.
func Connect() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("connecting to Docker: %w", err)
	}
	return cli, nil
}

// NewWithClient uses an existing Docker client (the caller closes it).
func NewWithClient(cli *client.Client) *Provider {
	return &Provider{docker: cli, importCmd: defaultImportCmd}
}
