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

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// runAgent joins the server named by K3S_URL: it starts containerd,
// kubelet and kube-proxy with the flags k3s would give them, then labels
// the Node kubelet registers. Node status, allocatable included, is
// kubelet's; SR-IOV resources come from a device plugin, as on real nodes.
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
