package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// runServer starts what a k3s server runs (k3s-io/k3s
// pkg/daemons/control/server.go): etcd + kube-apiserver,
// kube-controller-manager and kube-scheduler, then the node half
// (containerd + kubelet) every k3s server also runs; it publishes the
// kubeconfig and CoreDNS manifest where k3d reads them.
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
	serviceCIDR := firstNonEmpty(f.serviceCIDR, apiserver.DefaultServiceCIDR)
	clusterCIDR := firstNonEmpty(f.clusterCIDR, defaultClusterCIDR)
	clusterDNS := f.clusterDNS
	if clusterDNS == "" {
		// k3s: the 10th address of the service CIDR (pkg/cli/server/server.go).
		ip, err := apiserver.FirstIP(serviceCIDR)
		if err != nil {
			return err
		}
		ip[len(ip)-1] += 9
		clusterDNS = ip.String()
	}
	sans := append([]string{hostname, "0.0.0.0", "127.0.0.1", "localhost", "host.k3d.internal"}, f.tlsSANs...)
	ip := firstNonEmpty(f.nodeIP, nodeIP())
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
		ServiceCIDR:    serviceCIDR,
		ExtraArgs:      componentArgs(nil, f.apiserverArgs),
	})
	if err != nil {
		return fmt.Errorf("starting control plane of %s: %w", hostname, err)
	}
	defer srv.Stop()

	localKC := filepath.Join(serverDataDir, "admin.kubeconfig")
	for _, path := range []string{firstNonEmpty(os.Getenv("K3S_KUBECONFIG_OUTPUT"), defaultKubeconfigOutput), localKubeconfig, localKC} {
		if err := writeFile(path, srv.Kubeconfig, 0o600); err != nil {
			return fmt.Errorf("writing kubeconfig: %w", err)
		}
	}
	if err := writeFile(corednsManifest, corednsConfigMap(ip, hostname), 0o644); err != nil {
		return fmt.Errorf("writing CoreDNS manifest: %w", err)
	}

	logs := filepath.Join(serverDataDir, "logs")
	kcm, err := startProc("kube-controller-manager", filepath.Join(logs, "kube-controller-manager.log"), binPath("kube-controller-manager"),
		controllerManagerArgs(f, localKC, srv, clusterCIDR, serviceCIDR)...)
	if err != nil {
		return err
	}
	sched, err := startProc("kube-scheduler", filepath.Join(logs, "kube-scheduler.log"), binPath("kube-scheduler"),
		componentArgs(map[string]string{
			"kubeconfig":                localKC,
			"authentication-kubeconfig": localKC,
			"authorization-kubeconfig":  localKC,
			"bind-address":              "127.0.0.1",
			"secure-port":               "10259",
			"profiling":                 "false",
			"leader-elect":              "false",
		}, f.schedulerArgs)...)
	if err != nil {
		kcm.stop(5 * time.Second)
		return err
	}
	client, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		return fmt.Errorf("building client for local API: %w", err)
	}
	ac := agentConfig{ClusterCIDR: clusterCIDR, ClusterDNS: clusterDNS, ClusterDomain: firstNonEmpty(f.clusterDomain, "cluster.local")}
	if err := publishAgentConfig(ctx, client, ac); err != nil {
		sched.stop(5 * time.Second)
		kcm.stop(5 * time.Second)
		return err
	}
	node, err := startNode(ctx, nodeOptions{
		name: hostname, ip: ip, apiURL: srv.URL, token: token, caFile: srv.CACertFile,
		clusterDNS: ac.ClusterDNS, clusterDomain: ac.ClusterDomain, clusterCIDR: ac.ClusterCIDR, flags: f,
	})
	if err != nil {
		sched.stop(5 * time.Second)
		kcm.stop(5 * time.Second)
		return err
	}
	procs := append([]*proc{kcm, sched}, node...)
	labels := f.labels()
	// k3s labels its servers so (k3s-io/k3s pkg/agent/run.go, server roles).
	labels["node-role.kubernetes.io/control-plane"] = "true"
	labels["node-role.kubernetes.io/master"] = "true"
	keeper := &nodeKeeper{client: client, name: hostname, labels: labels}
	logf("k3s is up and running")
	logf("Cluster dns configmap has been set successfully")

	errc := make(chan error, 2)
	go func() { errc <- srv.Wait(ctx) }()
	go func() {
		if err := keeper.waitRegistered(ctx); err == nil {
			keeper.keepAlive(ctx)
		}
	}()
	err = supervise(ctx, procs, errc)
	if ctx.Err() != nil {
		logf("shutting down stand-in server")
		return nil
	}
	return err
}

// defaultClusterCIDR is k3s's default pod CIDR.
const defaultClusterCIDR = "10.42.0.0/16"

// controllerManagerArgs are k3s's kube-controller-manager flags
// (k3s-io/k3s pkg/daemons/control/server.go controllerManager): node CIDR
// allocation from --cluster-cidr, service-account credentials signed with
// the API server's key, the cluster CA as root CA and signer. Cloud
// controllers stay off as with k3s's embedded CCM.
func controllerManagerArgs(f k3sFlags, kubeconfig string, srv *apiserver.Server, clusterCIDR, serviceCIDR string) []string {
	return componentArgs(map[string]string{
		"kubeconfig":                       kubeconfig,
		"authentication-kubeconfig":        kubeconfig,
		"authorization-kubeconfig":         kubeconfig,
		"service-account-private-key-file": srv.ServiceAccountKeyFile,
		"root-ca-file":                     srv.CACertFile,
		"cluster-signing-cert-file":        srv.CACertFile,
		"cluster-signing-key-file":         srv.CAKeyFile,
		"allocate-node-cidrs":              "true",
		"cluster-cidr":                     clusterCIDR,
		"service-cluster-ip-range":         serviceCIDR,
		"use-service-account-credentials":  "true",
		"bind-address":                     "127.0.0.1",
		"secure-port":                      "10257",
		"profiling":                        "false",
		"leader-elect":                     "false",
		"configure-cloud-routes":           "false",
		"controllers":                      "*,tokencleaner,-service,-route,-cloud-node-lifecycle",
	}, f.controllerArgs)
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

// Real k3s agents fetch the cluster's settings from their server
// (/v1-k3s/config). The stand-in server publishes the few its agents need
// in a ConfigMap instead.
const (
	agentConfigNamespace = "kube-system"
	agentConfigName      = "k3s-standin-agent-config"
)

type agentConfig struct {
	ClusterCIDR, ClusterDNS, ClusterDomain string
}

func publishAgentConfig(ctx context.Context, client kubernetes.Interface, c agentConfig) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: agentConfigName, Namespace: agentConfigNamespace},
		Data:       map[string]string{"cluster-cidr": c.ClusterCIDR, "cluster-dns": c.ClusterDNS, "cluster-domain": c.ClusterDomain},
	}
	for {
		_, err := client.CoreV1().ConfigMaps(agentConfigNamespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = client.CoreV1().ConfigMaps(agentConfigNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		// The kube-system namespace appears shortly after the API is ready.
		select {
		case <-ctx.Done():
			return fmt.Errorf("publishing agent config: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func fetchAgentConfig(ctx context.Context, client kubernetes.Interface) (agentConfig, error) {
	for {
		cm, err := client.CoreV1().ConfigMaps(agentConfigNamespace).Get(ctx, agentConfigName, metav1.GetOptions{})
		if err == nil {
			return agentConfig{ClusterCIDR: cm.Data["cluster-cidr"], ClusterDNS: cm.Data["cluster-dns"], ClusterDomain: cm.Data["cluster-domain"]}, nil
		}
		logf("Waiting for the server's agent configuration: %v", err)
		select {
		case <-ctx.Done():
			return agentConfig{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
