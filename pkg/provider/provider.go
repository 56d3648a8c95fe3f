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

// DefaultImportCmd imports a `docker save` stream into the node's
// containerd. k3s's ctr defaults to the k8s.io namespace kubelet uses.
var defaultImportCmd = []string{"ctr", "images", "import", "--all-platforms", "-"}

// New connects to the Docker daemon named by the environment (DOCKER_HOST,
// like k3d itself, which opens its own connections the same way).
func New() (*Provider, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("connecting to Docker: %w", err)
	}
	return NewWithClient(cli), nil
}

// NewWithClient uses an existing Docker client (the caller closes it).
func NewWithClient(cli *client.Client) *Provider {
	return &Provider{docker: cli, importCmd: defaultImportCmd}
}

// Close releases the Docker connection.
func (p *Provider) Close() error { return p.docker.Close() }
