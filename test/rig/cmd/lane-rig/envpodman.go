package main

import (
	"context"
	"fmt"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// podmanHostImages are the images a rig lane on Podman needs in Podman's own
// store: what the host's engine runs (the node image, k3d's tools, the
// lane registry's). The component images come from the rig registry, as on
// Docker.
var podmanHostImages = []string{testutil.StandinK3sImage, testutil.StandinToolsImage, testutil.StandinRegistryImage}

// podmanImages copies the rig's host images from Docker into rootful
// Podman (hack/test-env.sh starts its API service) when Podman's image of
// the name is not Docker's: an image's ID is its config's digest, which
// docker save and Podman's load keep, so it is the content key. Podman
// stores a short name under localhost/ and its Docker-compatible API finds
// it by the short name, as k3d asks for it.
func (e *env) podmanImages(ctx context.Context) error {
	podman, err := client.NewClientWithOpts(client.WithHost("unix://"+provider.PodmanSocket), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer podman.Close()
	for _, ref := range podmanHostImages {
		want, err := e.docker.ImageInspect(ctx, ref)
		if err != nil {
			return fmt.Errorf("inspecting %s in Docker: %w", ref, err)
		}
		if got, err := podman.ImageInspect(ctx, ref); err == nil && got.ID == want.ID {
			continue
		}
		e.l.V(0).Infof("copying %s into Podman", ref)
		if err := copyImage(ctx, e.docker, podman, ref); err != nil {
			return err
		}
		got, err := podman.ImageInspect(ctx, ref)
		if err != nil {
			return fmt.Errorf("inspecting %s in Podman after loading it: %w", ref, err)
		}
		if got.ID != want.ID {
			return fmt.Errorf("%s in Podman is %s after loading Docker's %s", ref, got.ID, want.ID)
		}
	}
	return nil
}

func copyImage(ctx context.Context, from, to *client.Client, ref string) error {
	rc, err := from.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("saving %s: %w", ref, err)
	}
	defer rc.Close()
	resp, err := to.ImageLoad(ctx, rc)
	if err != nil {
		return fmt.Errorf("loading %s into Podman: %w", ref, err)
	}
	defer resp.Body.Close()
	return buildError(resp.Body)
}
