package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	dpConfigNamespace = "kube-system"
	dpConfigName      = "sriovdp-config"
	dpConfigKey       = "config.json"
)

// runAgent joins the server named by K3S_URL: it starts containerd and
// kubelet with the flags k3s would give them, then labels the Node kubelet
// registers. Until the device plugin stand-in runs as a DaemonSet it also
// advertises the SR-IOV VFs as Node capacity (see nodeKeeper).
func runAgent(ctx context.Context, f k3sFlags) error {
	hostname, err := nodeName(f)
	if err != nil {
		return err
	}
	url := firstNonEmpty(os.Getenv("K3S_URL"), f.server)
	if url == "" {
		return errors.New("agent needs K3S_URL (or --server)")
	}
	token := firstNonEmpty(os.Getenv("K3S_TOKEN"), f.token)
	cfg := &rest.Config{
		Host:        url,
		BearerToken: token,
		// Real agents pin the server CA via the token hash; the stand-in
		// trusts the network k3d created for it.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Dial:            dialContext,
		Timeout:         10 * time.Second,
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client for %s: %w", url, err)
	}
	if err := waitForServer(ctx, client, url); err != nil {
		return err
	}
	// k3s hands kubelet a local load balancer address; the stand-in hands
	// it the server's address, resolved once (see resolver.go).
	apiURL, err := resolveURL(ctx, url)
	if err != nil {
		return err
	}
	ac, err := fetchAgentConfig(ctx, client)
	if err != nil {
		return err
	}
	procs, err := startNode(ctx, nodeOptions{
		name: hostname, ip: firstNonEmpty(f.nodeIP, nodeIP()), apiURL: apiURL, token: token,
		clusterDNS: ac.ClusterDNS, clusterDomain: ac.ClusterDomain, clusterCIDR: ac.ClusterCIDR, flags: f,
	})
	if err != nil {
		return err
	}
	node := &nodeKeeper{client: client, name: hostname, labels: f.labels()}
	node.resources = func(ctx context.Context) (map[string]int64, error) {
		return sriovResources(ctx, client)
	}
	go func() {
		if err := node.waitRegistered(ctx); err == nil {
			node.keepAlive(ctx)
		}
	}()
	err = supervise(ctx, procs, nil)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// resolveURL replaces the host of an https URL by its IPv4 address.
func resolveURL(ctx context.Context, raw string) (string, error) {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing server URL %q: %w", raw, err)
	}
	host := u.Hostname()
	if net.ParseIP(host) != nil {
		return raw, nil
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return "", fmt.Errorf("resolving server %s: %w", host, err)
	}
	if p := u.Port(); p != "" {
		u.Host = net.JoinHostPort(addrs[0], p)
	} else {
		u.Host = addrs[0]
	}
	return u.String(), nil
}

// waitForServer retries until the API server answers, as a k3s agent that
// starts before its server does.
func waitForServer(ctx context.Context, client kubernetes.Interface, url string) error {
	for {
		res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		var code int
		res.StatusCode(&code)
		if res.Error() == nil && code == http.StatusOK {
			return nil
		}
		logf("Waiting to retrieve agent configuration; server %s is not ready: %v", url, res.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// sriovResources mirrors the device plugin: no ConfigMap or no fake sysfs
// means no SR-IOV resources.
func sriovResources(ctx context.Context, client kubernetes.Interface) (map[string]int64, error) {
	cm, err := client.CoreV1().ConfigMaps(dpConfigNamespace).Get(ctx, dpConfigName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", dpConfigNamespace, dpConfigName, err)
	}
	config, ok := cm.Data[dpConfigKey]
	if !ok || config == "" {
		return nil, nil
	}
	root, err := findSysfsRoot("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	if root == "" {
		return nil, errors.New("no fake sysfs bind mount (a mount holding bus/pci/devices other than /sys) in this node: advertising nothing")
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links of the node's netns: %w", err)
	}
	res, err := allocatable(root, []byte(config), links)
	if err != nil {
		return nil, fmt.Errorf("device plugin on %s: %w", root, err)
	}
	return res, nil
}
