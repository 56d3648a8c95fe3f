package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/test/apiserver"
)

const (
	defaultKubeconfigOutput = "/output/kubeconfig.yaml"
	localKubeconfig         = "/etc/rancher/k3s/k3s.yaml"
	corednsManifest         = "/var/lib/rancher/k3s/server/manifests/coredns.yaml"
	// serverDataDir is k3s's datastore dir: etcd keeps its data in
	// <dir>/etcd, where k3s's embedded etcd has it, so a lane's
	// server.datastoreOnTmpfs mount holds the stand-in's etcd as it would
	// k3s's (certificates and logs of the stand-in sit beside it).
	serverDataDir = "/var/lib/rancher/k3s/server/db"
)

// runServer starts etcd + kube-apiserver from the binaries in the image,
// publishes the kubeconfig and CoreDNS manifest where k3d reads them, and
// keeps this container's Node registered and Ready.
func runServer(ctx context.Context, f k3sFlags) error {
	hostname, err := nodeName(f)
	if err != nil {
		return err
	}
	token := firstNonEmpty(os.Getenv("K3S_TOKEN"), f.token)
	port := 6443
	if f.httpsPort != "" {
		if port, err = strconv.Atoi(f.httpsPort); err != nil {
			return fmt.Errorf("parsing --https-listen-port %q: %w", f.httpsPort, err)
		}
	}
	sans := append([]string{hostname, "0.0.0.0", "127.0.0.1", "localhost", "host.k3d.internal"}, f.tlsSANs...)
	ip := nodeIP()
	if ip != "" {
		sans = append(sans, ip)
	}

	// k3s logs this line before its API server answers; k3d waits for it
	// when (re)starting an init server.
	logf("Running kube-apiserver (stand-in: real kube-apiserver + etcd from %s)", assetsDir())
	srv, err := apiserver.Start(ctx, apiserver.Options{
		AssetsDir:      assetsDir(),
		Dir:            serverDataDir,
		SANs:           sans,
		Token:          token,
		BindAddress:    "0.0.0.0",
		SecurePort:     port,
		EtcdClientPort: 2379,
		EtcdPeerPort:   2380,
		KubeconfigHost: "127.0.0.1",
	})
	if err != nil {
		return fmt.Errorf("starting control plane of %s: %w", hostname, err)
	}
	defer srv.Stop()

	for _, path := range []string{firstNonEmpty(os.Getenv("K3S_KUBECONFIG_OUTPUT"), defaultKubeconfigOutput), localKubeconfig} {
		if err := writeFile(path, srv.Kubeconfig, 0o600); err != nil {
			return fmt.Errorf("writing kubeconfig: %w", err)
		}
	}
	if err := writeFile(corednsManifest, corednsConfigMap(ip, hostname), 0o644); err != nil {
		return fmt.Errorf("writing CoreDNS manifest: %w", err)
	}

	client, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		return fmt.Errorf("building client for local API: %w", err)
	}
	labels := f.labels()
	labels["node-role.kubernetes.io/control-plane"] = "true"
	labels["node-role.kubernetes.io/master"] = "true"
	node := &nodeKeeper{client: client, name: hostname, ip: ip, labels: labels}
	if err := node.register(ctx); err != nil {
		return fmt.Errorf("registering server node %s: %w", hostname, err)
	}
	logf("k3s is up and running")
	logf("Cluster dns configmap has been set successfully")

	errc := make(chan error, 1)
	go func() { errc <- srv.Wait(ctx) }()
	go node.keepAlive(ctx)
	select {
	case <-ctx.Done():
		logf("shutting down stand-in server")
		return nil
	case err := <-errc:
		return err
	}
}

func assetsDir() string {
	return firstNonEmpty(os.Getenv("SRIOV_LANE_STANDIN_ASSETS"), "/bin")
}

func nodeName(f k3sFlags) (string, error) {
	if n := firstNonEmpty(f.nodeName, os.Getenv("K3S_NODE_NAME")); n != "" {
		return n, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading hostname for node name: %w", err)
	}
	return h, nil
}

// nodeIP is the container's first global IPv4 address (k3s picks the
// default-route interface; in a k3d node that is eth0).
func nodeIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// corednsConfigMap renders the manifest k3d rewrites (it adds NodeHosts);
// the stand-in runs no CoreDNS, so only the document's shape matters.
func corednsConfigMap(ip, hostname string) []byte {
	var hosts string
	if ip != "" {
		hosts = ip + " " + hostname
	}
	return []byte(strings.Join([]string{
		"apiVersion: v1",
		"kind: ConfigMap",
		"metadata:",
		"  name: coredns",
		"  namespace: kube-system",
		"data:",
		"  Corefile: |",
		"    .:53 {",
		"        errors",
		"        hosts /etc/coredns/NodeHosts {",
		"          fallthrough",
		"        }",
		"        forward . /etc/resolv.conf",
		"    }",
		"  NodeHosts: " + strconv.Quote(hosts),
		"",
	}, "\n"))
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
