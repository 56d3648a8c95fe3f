package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sriov-lane/sriov-lane/test/proc"
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
	// Flags win over their environment variables (urfave/cli; k3s-io/k3s
	// pkg/cli/cmds/agent.go@v1.35.5+k3s1: --server EnvVar K3S_URL, --token K3S_TOKEN).
	url := flagOrEnv(f.server, "K3S_URL")
	if url == "" {
		return errors.New("agent needs K3S_URL (or --server)")
	}
	token := flagOrEnv(f.token, "K3S_TOKEN")
	ips, err := nodeIPs(f.nodeIPs, systemHost)
	if err != nil {
		return fmt.Errorf("failed to get node name and addresses: %w", err)
	}
	cfg := &rest.Config{
		Host:        url,
		BearerToken: token,
		// Real agents pin the server CA via the token hash; the stand-in
		// trusts the network k3d created for it.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Timeout:         10 * time.Second,
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client for %s: %w", url, err)
	}
	if err := waitForServer(ctx, client, url); err != nil {
		return err
	}
	ac, err := fetchAgentConfig(ctx, client)
	if err != nil {
		return err
	}
	clusterCIDRs, err := parseCIDRs("cluster-cidr", []string{ac.ClusterCIDR})
	if err != nil {
		return fmt.Errorf("server's agent configuration: %w", err)
	}
	serviceCIDRs, err := parseCIDRs("service-cidr", []string{ac.ServiceCIDR})
	if err != nil {
		return fmt.Errorf("server's agent configuration: %w", err)
	}
	if ips, err = agentAddresses(ips, clusterCIDRs, serviceCIDRs); err != nil {
		return err
	}
	// k3s hands kubelet a local load balancer address; the stand-in hands
	// it the server's address, resolved once with the node's resolver.
	apiURL, err := resolveURL(ctx, url, ips[0])
	if err != nil {
		return err
	}
	procs, err := startNode(ctx, nodeOptions{
		name: hostname, ips: ips, apiURL: apiURL, token: token,
		clusterDNS: splitList(ac.ClusterDNS), clusterDomain: ac.ClusterDomain, clusterCIDR: ac.ClusterCIDR, flags: f,
	})
	if err != nil {
		return err
	}
	node := &nodeKeeper{client: client, name: hostname, labels: f.labels()}
	go func() { _ = node.configure(ctx) }()
	err = proc.Supervise(ctx, procs, nil)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// resolveURL replaces the host of an https URL by one of its addresses,
// of the family of the node's first address when it has one: the name
// resolves with the node's resolv.conf alone (after k3d's DNS fix, the
// network gateway), as a real agent resolves K3S_URL; when that fails the
// agent does not join, as a real one would not.
func resolveURL(ctx context.Context, raw string, family net.IP) (string, error) {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing server URL %q: %w", raw, err)
	}
	host := u.Hostname()
	if net.ParseIP(host) != nil {
		return raw, nil
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", fmt.Errorf("resolving server %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolving server %s: no addresses", host)
	}
	pick := pickAddress(addrs, family)
	if p := u.Port(); p != "" {
		u.Host = net.JoinHostPort(pick, p)
	} else if strings.Contains(pick, ":") {
		u.Host = "[" + pick + "]"
	} else {
		u.Host = pick
	}
	return u.String(), nil
}

// serverRetry is how long an agent waits before it asks a server that has
// not answered, or not yet published the agent configuration, again.
const serverRetry = time.Second

// waitForServer retries until the API server answers, as a k3s agent that
// starts before its server does.
func waitForServer(ctx context.Context, client kubernetes.Interface, url string) error {
	return wait.PollUntilContextCancel(ctx, serverRetry, true, func(ctx context.Context) (bool, error) {
		res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		var code int
		res.StatusCode(&code)
		if res.Error() == nil && code == http.StatusOK {
			return true, nil
		}
		logf("Waiting to retrieve agent configuration; server %s is not ready: %v", url, res.Error())
		return false, nil
	})
}

// pickAddress is the first of addrs in family's IP family, else the first.
func pickAddress(addrs []string, family net.IP) string {
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && (ip.To4() == nil) == (family.To4() == nil) {
			return a
		}
	}
	return addrs[0]
}
