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

// Engines are a command run's clients of the container engines, one per
// engine address, each made when a lane first asks for it: down --all may
// meet lanes on Docker and on Podman. pkg/cmd makes one Engines a run and
// closes it when the run ends; everything below asks it.
type Engines struct {
	clis map[string]*client.Client
}

// Client is the run's client of the engine a lane whose containerEngine
// is setting runs on (HostEngine). It points k3d at that engine too, each
// time, as the lane before may have been on the other: k3d reads only
// DOCKER_HOST.
func (e *Engines) Client(setting string) (*client.Client, error) {
	eng, err := HostEngine(setting)
	if err != nil {
		return nil, err
	}
	if cli, ok := e.clis[eng.Host]; ok {
		return cli, eng.Use()
	}
	cli, err := eng.Connect()
	if err != nil {
		return nil, err
	}
	if e.clis == nil {
		e.clis = map[string]*client.Client{}
	}
	e.clis[eng.Host] = cli
	return cli, nil
}

// Len is how many engines the run has a client of.
func (e *Engines) Len() int { return len(e.clis) }

// Close closes every client.
func (e *Engines) Close() {
	for _, cli := range e.clis {
		cli.Close()
	}
	e.clis = nil
}

// NewWithClient uses an existing Docker client (the caller closes it).
func NewWithClient(cli *client.Client) *Provider {
	return &Provider{docker: cli, importCmd: defaultImportCmd}
}
