package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// rigRegistryName is the container serving the rig's component images.
const rigRegistryName = "sriov-lane-rig-registry"

const (
	// registryReadyTimeout: the registry answers within a second of its
	// start; ten leave room for a loaded machine.
	registryReadyTimeout = 10 * time.Second
	// registryPollInterval: short, as the wait is usually one or two polls.
	registryPollInterval = 100 * time.Millisecond
)

// rigPushes are the images the rig registry serves: each local image under
// the repository path of the upstream name the product deploys (k3s's own
// images under the names k3s pulls: CoreDNS, local-path-provisioner's
// stand-in and its helper pod's busybox, and the sandbox image).
var rigPushes = []struct{ local, upstream string }{
	{cni.FlannelImage, cni.FlannelImage},
	{cni.MultusImage, cni.MultusImage},
	{cni.InjectorImage, cni.InjectorImage},
	{testutil.StandinFlannelCNIPluginImage, cni.FlannelCNIPluginImage},
	{testutil.StandinDevicePluginImage, cni.DevicePluginImage},
	{testutil.StandinBusyboxImage, cni.SmokeImage},
	{testutil.StandinSRIOVCNIImage, cni.SRIOVCNIImage},
	{testutil.StandinDRADriverImage, cni.DRADriverImage},
	{provider.K3sCoreDNSImage, provider.K3sCoreDNSImage},
	{provider.K3sLocalPathImage, provider.K3sLocalPathImage},
	{testutil.StandinBusyboxImage, provider.K3sLocalPathHelperImage},
	{testutil.StandinPauseImage, provider.K3sPauseImage},
	{testutil.StandinFleetJobImage, testutil.StandinFleetJobImage},
}

// mirrorPath is the repository path (and tag) a mirror serves ref under:
// the product's own rule (cni.MirrorImage) with the mirror left off.
func mirrorPath(ref string) string {
	const m = "mirror"
	return strings.TrimPrefix(cni.MirrorImage(m, ref), m+"/")
}

// rigRegistry runs the rig's registry and fills it. Rig lanes get their
// component images the way users' lanes can: through imageRegistryMirror,
// from a registry that serves them under the repository paths of their
// upstream names. It runs on the host network, so nodes on any Docker
// network reach it at the default bridge's gateway address; its storage is
// cached, so warm pushes only compare digests.
func (e *env) rigRegistry(ctx context.Context) error {
	if err := e.rigRegistryUp(ctx); err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(e.o.registryPort)
	for _, p := range rigPushes {
		// Layers go as plain tar (docker push would gzip them, and each
		// node's containerd would spend half its CPU of a rig up
		// gunzipping); nothing goes when the registry has the image.
		if _, err := pushImage(ctx, e.docker, addr, p.local, mirrorPath(p.upstream)); err != nil {
			return err
		}
	}
	gw, err := e.bridgeAddress(ctx)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(e.assets, testutil.RigImageMirrorFile), fmt.Appendf(nil, "http://%s:%d\n", gw, e.o.registryPort), 0o644); err != nil {
		return err
	}
	removeDangling(ctx, e.docker)
	return nil
}

// rigRegistryUp (re)starts the registry container unless it runs the
// current registry image, and waits for it to answer.
func (e *env) rigRegistryUp(ctx context.Context) error {
	want, err := e.docker.ImageInspect(ctx, testutil.StandinRegistryImage)
	if err != nil {
		return fmt.Errorf("inspecting %s: %w", testutil.StandinRegistryImage, err)
	}
	have, err := e.docker.ContainerInspect(ctx, rigRegistryName)
	if err != nil || have.State == nil || !have.State.Running || have.Image != want.ID {
		_ = e.docker.ContainerRemove(ctx, rigRegistryName, container.RemoveOptions{Force: true})
		storage := filepath.Join(e.o.cache, "rig-registry")
		if err := os.MkdirAll(storage, 0o755); err != nil {
			return err
		}
		c, err := e.docker.ContainerCreate(ctx,
			&container.Config{Image: testutil.StandinRegistryImage, Env: []string{"REGISTRY_HTTP_ADDR=0.0.0.0:" + strconv.Itoa(e.o.registryPort)}},
			&container.HostConfig{NetworkMode: network.NetworkHost, RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
				Binds: []string{storage + ":/var/lib/registry"}},
			nil, nil, rigRegistryName)
		if err != nil {
			return fmt.Errorf("creating %s: %w", rigRegistryName, err)
		}
		if err := e.docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("starting %s: %w", rigRegistryName, err)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v2/", e.o.registryPort)
	err = wait.PollUntilContextTimeout(ctx, registryPollInterval, registryReadyTimeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode/100 == 2, nil
	})
	if err != nil {
		if logs, lerr := e.docker.ContainerLogs(ctx, rigRegistryName, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); lerr == nil {
			_, _ = stdcopy.StdCopy(os.Stderr, os.Stderr, logs)
			logs.Close()
		}
		return fmt.Errorf("rig registry %s does not answer on 127.0.0.1:%d: %w", rigRegistryName, e.o.registryPort, err)
	}
	return nil
}

// bridgeAddress is where nodes reach the host-network registry: the IPv4
// address of the default bridge's link, read from the link itself. Docker
// 20.10 records IPAM's Gateway only when the link existed before dockerd
// started (true on a kept machine, false on a new one), so the network's
// IPAM config is no source for it.
func (e *env) bridgeAddress(ctx context.Context) (string, error) {
	link := "docker0"
	if n, err := e.docker.NetworkInspect(ctx, "bridge", network.InspectOptions{}); err == nil && n.Options["com.docker.network.bridge.name"] != "" {
		link = n.Options["com.docker.network.bridge.name"]
	}
	ifc, err := net.InterfaceByName(link)
	if err != nil {
		return "", fmt.Errorf("the link of Docker's default bridge network: %w", err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", link, err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
			return ip.IP.String(), nil
		}
	}
	return "", errors.New("no IPv4 address on " + link + ", the link of Docker's default bridge network")
}
