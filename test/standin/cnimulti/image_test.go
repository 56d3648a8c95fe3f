package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// The node image lays the plugins out as rancher/k3s does (k3s-io/k3s
// scripts/package-cli@v1.35.5+k3s1 and package/Dockerfile@v1.35.5+k3s1,
// read at 6a4781ad): /bin/cni one binary, each plugin of
// rancher/plugins main_linux.go@v1.9.1-k3s1 a link "cni" beside it. A copy
// made with cp -L, as the plugin copiers do, runs as the plugin it is named
// after; a copy of the link alone points at nothing.
func TestNodeImageLaysPluginsOutAsK3s(t *testing.T) {
	cli := testutil.RequireDockerClient(t)
	testutil.RequireImage(t, cli, testutil.StandinK3sImage)
	var script strings.Builder
	script.WriteString("[ -f /bin/cni ] && [ ! -L /bin/cni ] || { echo '/bin/cni is no file'; exit 1; }\n")
	for name := range plugins {
		// Each line fails the script, naming the plugin and what its link is.
		script.WriteString(`[ "$(readlink /bin/` + name + `)" = cni ] || { echo "/bin/` + name + ` -> $(readlink /bin/` + name + `)"; exit 1; }` + "\n")
	}
	script.WriteString("cp -L /bin/bridge /tmp/bridge && CNI_COMMAND=VERSION /tmp/bridge </dev/null\n")
	script.WriteString("cp -P /bin/bridge /tmp/link && ! /tmp/link 2>/dev/null && echo 'a copied link dangles'\n")

	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(2*time.Minute))
	defer cancel()
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image: testutil.StandinK3sImage, Entrypoint: []string{"/bin/sh", "-c", script.String()},
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int64
	waitc, errc := cli.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
	select {
	case w := <-waitc:
		code = w.StatusCode
	case err := <-errc:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(out.String(), `"supportedVersions"`) || !strings.Contains(out.String(), "a copied link dangles") {
		t.Errorf("the node image's plugin layout: exit %d\n%s", code, out.String())
	}
}
