package cmd

import (
	"os"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// down --all may act on a Docker lane, a Podman lane, then a Docker lane
// again: k3d, which takes its engine from DOCKER_HOST, must follow each
// lane, also when the run's client of that engine already exists, and the
// DOCKER_HOST set for one lane must not choose the next lane's engine.
func TestDockerPointsK3dAtEachLanesEngine(t *testing.T) {
	// Other tests of the package point k3d at an engine too: what chooses
	// is the DOCKER_HOST this process was started with.
	if e, _ := provider.HostEngine(config.EnginePodman); e.Host != "unix://"+provider.PodmanSocket {
		t.Fatalf("the test process was started with DOCKER_HOST=%s, which chooses every lane's engine: run it without", e.Host)
	}
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_SOCK", "")
	g := &globals{}
	defer g.close()
	for _, engine := range []string{config.EngineDocker, config.EnginePodman, config.EngineDocker} {
		if _, err := g.docker(&config.Lane{ContainerEngine: engine}); err != nil {
			t.Fatal(err)
		}
		sock := provider.DockerSocket
		if engine == config.EnginePodman {
			sock = provider.PodmanSocket
		}
		if got := os.Getenv("DOCKER_HOST"); got != "unix://"+sock {
			t.Errorf("after a %s lane: DOCKER_HOST=%q, want unix://%s", engine, got, sock)
		}
		if got := os.Getenv("DOCKER_SOCK"); got != sock {
			t.Errorf("after a %s lane: DOCKER_SOCK=%q, want %s", engine, got, sock)
		}
	}
	if len(g.clis) != 2 {
		t.Errorf("%d clients, want one per engine", len(g.clis))
	}
}
