// Package sriovtest holds helpers for pkg/sriov's tests and benchmark: a
// tiny busybox "sleeper" image and containers running it.
package sriovtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// SleeperImage is a FROM-scratch image holding only busybox; its
// containers just sleep, giving a running process with its own netns.
const SleeperImage = "sx-sleeper:test"

const dockerfile = "FROM scratch\nCOPY busybox /bin/busybox\nCMD [\"/bin/busybox\", \"sleep\", \"100000\"]\n"

// EnsureSleeperImage builds SleeperImage from the host's static busybox
// unless it exists. No registry is needed.
func EnsureSleeperImage(ctx context.Context, cli *client.Client) error {
	if _, err := cli.ImageInspect(ctx, SleeperImage); err == nil {
		return nil
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("reading static busybox for %s: %w", SleeperImage, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"busybox", 0o755, bb}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{SleeperImage}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		return fmt.Errorf("building %s: %w", SleeperImage, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if _, err := cli.ImageInspect(ctx, SleeperImage); err != nil {
		return fmt.Errorf("building %s: image missing after build: %s", SleeperImage, out)
	}
	return nil
}

// RunSleeper starts a sleeper container called name (removing a leftover of
// that name first) and returns its id.
func RunSleeper(ctx context.Context, cli *client.Client, name string) (string, error) {
	_ = RemoveContainer(ctx, cli, name)
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: SleeperImage},
		&container.HostConfig{}, nil, nil, name)
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", name, err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return "", fmt.Errorf("starting container %s: %w", name, err)
	}
	return c.ID, nil
}

// RemoveContainer force-removes a container; a missing one is fine.
func RemoveContainer(ctx context.Context, cli *client.Client, name string) error {
	err := cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing container %s: %w", name, err)
	}
	return nil
}
