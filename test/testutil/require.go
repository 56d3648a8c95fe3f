package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"
)

// Stand-in image names. They carry "standin" in both repository and tag so
// they can never be mistaken for a real k3s, k3d-tools or registry image.
const (
	StandinK3sImage      = "sriov-lane-standin/k3s:v1.36.3-k3s1-standin-node"
	StandinToolsImage    = "sriov-lane-standin/k3d-tools:standin-node"
	StandinRegistryImage = "sriov-lane-standin/registry:2-standin"
	// StandinPauseImage is the stand-in sandbox image (test/standin/pause),
	// which the rig registry serves as k3s's rancher/mirrored-pause:3.6.
	StandinPauseImage = "sriov-lane-standin/pause:3.6-standin"
	// StandinDevicePluginImage stands in for
	// ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0
	// (test/standin/sriovdp).
	StandinDevicePluginImage = "sriov-lane-standin/sriov-network-device-plugin:v3.11.0-standin"
	// StandinSRIOVCNIImage stands in for
	// ghcr.io/k8snetworkplumbingwg/sriov-cni:v2.10.0 (/usr/bin/sriov and
	// the image's /entrypoint.sh, test/standin/sriovcni).
	StandinSRIOVCNIImage = "sriov-lane-standin/sriov-cni:v2.10.0-standin"
	// StandinDRADriverImage stands in for
	// ghcr.io/k8snetworkplumbingwg/dra-driver-sriov:14490e9 (the driver,
	// test/standin/drasriov, at the image's /usr/bin/dra-driver-sriov).
	StandinDRADriverImage = "sriov-lane-standin/dra-driver-sriov:14490e9-standin"
	// StandinFlannelCNIPluginImage stands in for
	// ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3 (/flannel,
	// test/standin/flannelcni).
	StandinFlannelCNIPluginImage = "sriov-lane-standin/flannel-cni-plugin:v1.9.1-flannel3-standin"
	// FlannelImage is built by `make test-env` from flannel's Go module under
	// the upstream name the product deploys (pkg/cni.FlannelImage).
	FlannelImage = "ghcr.io/flannel-io/flannel:v0.28.9"
	// MultusImage is built by `make test-env` from Multus's Go module under
	// the upstream name the product deploys (pkg/cni.MultusImage).
	MultusImage = "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick"
	// StandinBusyboxImage stands in for the smoke pod's
	// docker.io/library/busybox:1.37.0 (pkg/cni.SmokeImage): Debian's
	// busybox-static, which may be another busybox version.
	StandinBusyboxImage = "sriov-lane-standin/busybox:1.37.0-standin"
	// StandinFleetJobImage stands in for a fleet's CI job image, which
	// holds sriov-lane: busybox and sriov-lane built from this checkout.
	StandinFleetJobImage = "sriov-lane-standin/fleet-job:standin"
)

// Strict reports whether a missing prerequisite must fail the test rather
// than skip it. `make test` (and so CI) sets SRIOV_LANE_TEST_STRICT=1: there
// every test must run, and a skip would hide a broken set-up.
func Strict() bool { return os.Getenv("SRIOV_LANE_TEST_STRICT") == "1" }

// skipOrFail skips with the reason, or fails with it in strict mode.
func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if Strict() {
		t.Fatalf("prerequisite missing under SRIOV_LANE_TEST_STRICT=1: %s", reason)
	}
	t.Skip(reason)
}

// SkipOrFail skips with the reason, or fails with it in strict mode: for
// requirements of other packages (test/kernel/vm's kernels and QEMU).
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	skipOrFail(t, reason)
}

// RequireRoot skips (or fails in strict mode) unless running as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (netlink moves, network namespaces, sysfs); run `sudo make test`")
	}
}

// RequireDocker skips (or fails in strict mode) unless a Docker daemon
// answers, and returns a client for it. It points TMPDIR at the test's temp
// dir (t.Setenv, so not for parallel tests): the k3d library, used in the
// test process, leaves a temp hosts file per node per cluster it creates.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	cli := RequireDockerClient(t)
	t.Setenv("TMPDIR", t.TempDir())
	return cli
}

// RequireDockerClient is RequireDocker without the TMPDIR change, for tests
// that run in parallel and leave k3d to the sriov-lane binary (which gives
// it a private TMPDIR itself).
func RequireDockerClient(t testing.TB) *client.Client {
	t.Helper()
	if !holdsDockerAlone(t) {
		lockDocker(t, unix.LOCK_SH)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		skipOrFail(t, "needs Docker: "+err.Error())
		return nil
	}
	if err := pingDocker(cli); err != nil {
		cli.Close()
		skipOrFail(t, "needs a running Docker daemon (`make test-env` starts one): "+err.Error())
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// PodmanSocket is provider.PodmanSocket, where rootful Podman's API
// listens; testutil cannot import pkg/provider, whose tests import it
// (pkg/provider's TestSelectEngine holds the two equal).
const PodmanSocket = "/run/podman/podman.sock"

// RequirePodmanClient is a client of rootful Podman's API service, which
// make test-env starts beside dockerd, with the rig's host images in its
// store (lane-rig env); it skips, or fails under SRIOV_LANE_TEST_STRICT,
// where it does not answer.
func RequirePodmanClient(t testing.TB) *client.Client {
	t.Helper()
	cli, err := podmanIfThere()
	if err == nil && cli == nil {
		err = fmt.Errorf("no %s", PodmanSocket)
	}
	if err == nil {
		if err = pingDocker(cli); err != nil {
			cli.Close()
		}
	}
	if err != nil {
		skipOrFail(t, "needs rootful Podman's API service (`make test-env` starts one): "+err.Error())
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// podmanIfThere is a client of rootful Podman's API, or nil where its
// socket is not.
func podmanIfThere() (*client.Client, error) {
	if _, err := os.Stat(PodmanSocket); err != nil {
		return nil, nil
	}
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+PodmanSocket), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("podman client: %w", err)
	}
	return cli, nil
}

// DockerPing reports whether the Docker daemon of the environment answers
// within 5 s.
func DockerPing() error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	return pingDocker(cli)
}

func pingDocker(cli *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cli.Ping(ctx)
	return err
}

// RequireImage skips (or fails in strict mode) unless the image exists
// locally; stand-in images are built by `make test-env`.
func RequireImage(t testing.TB, cli *client.Client, ref string) {
	t.Helper()
	if _, err := cli.ImageInspect(context.Background(), ref); err != nil {
		skipOrFail(t, "needs image "+ref+" (built by `make test-env`): "+err.Error())
	}
}

// RequireEnvPath returns the value of an environment variable naming a path
// that must exist, skipping (or failing in strict mode) otherwise.
func RequireEnvPath(t testing.TB, name, what string) string {
	t.Helper()
	p := os.Getenv(name)
	if p == "" {
		skipOrFail(t, "needs "+what+": set "+name+" (`make test` sets it)")
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		skipOrFail(t, "needs "+what+": "+name+"="+p+": "+err.Error())
	}
	return p
}

// RigImageMirrorFile is the file under $SRIOV_LANE_TEST_ASSETS that holds
// the address of the registry `make test-env` runs for rig lanes
// (http://IP:PORT): it serves every component image under its upstream
// repository path.
const RigImageMirrorFile = "rig-image-mirror"

// RigImageMirror is that address, or "" without make test-env's assets (a
// lane brought up then waits for images it cannot pull, and says so).
func RigImageMirror() string {
	b, err := os.ReadFile(filepath.Join(os.Getenv("SRIOV_LANE_TEST_ASSETS"), RigImageMirrorFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RequireRigImageMirror skips (or fails in strict mode) unless make
// test-env's rig registry is known: a rig lane without it waits minutes for
// images its nodes cannot pull.
func RequireRigImageMirror(t testing.TB) string {
	t.Helper()
	m := RigImageMirror()
	if m == "" {
		skipOrFail(t, "needs the rig's image registry (make test-env writes $SRIOV_LANE_TEST_ASSETS/"+RigImageMirrorFile+"; `make test` sets SRIOV_LANE_TEST_ASSETS)")
	}
	return m
}
