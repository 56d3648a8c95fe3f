package provider

import (
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

// Connect makes a client of the engine a lane whose containerEngine is
// setting runs on (SelectEngine) and points k3d at it too.
func Connect(setting string) (*client.Client, error) {
	e, err := HostEngine(setting)
	if err != nil {
		return nil, err
	}
	return e.Connect()
}

// NewWithClient uses an existing Docker client (the caller closes it).
func NewWithClient(cli *client.Client) *Provider {
	return &Provider{docker: cli, importCmd: defaultImportCmd}
}
