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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/test/apiserver"
	"github.com/sriov-lane/sriov-lane/test/proc"
)

const (
	localKubeconfig = "/etc/rancher/k3s/k3s.yaml"
	// serverDir is k3s's server data dir, laid out as k3s lays it out
	// (k3s-io/k3s pkg/daemons/control/deps/deps.go@v1.35.5+k3s1
	// CreateRuntimeCertFiles, read at 6a4781ad): the CAs and certificates
	// in tls/, the admin kubeconfig in cred/; the datastore in db/
	// (embedded etcd in db/etcd: pkg/etcd/etcd.go@v1.35.5+k3s1 dbDir); a
	// CA whose files exist is kept at start (deps.go createSigningCertKey).
	// Only db/ is on a lane's server.datastoreOnTmpfs mount: tls/ and
	// cred/ are in the image's VOLUME /var/lib/rancher/k3s
	// (k3s-io/k3s package/Dockerfile@v1.35.5+k3s1), so a restarted server keeps
	// its CA and the credentials handed out before, and with its
	// datastore on a tmpfs starts on an empty one.
	serverDir = "/var/lib/rancher/k3s/server"
)

// runServer starts what a k3s server runs (k3s-io/k3s
// pkg/daemons/control/server.go@v1.35.5+k3s1 Server): etcd + kube-apiserver,
// kube-controller-manager and kube-scheduler, then the node half
// (containerd + kubelet) every k3s server also runs, and k3s's packaged
// components; it publishes the kubeconfig and manifests where k3d reads them.
func runServer(ctx context.Context, f k3sFlags) error {
	hostname, err := nodeName(f)
	if err != nil {
		return err
	}
	pk, err := newPackaged(f)
	if err != nil {
		return err
	}
	// A flag given on the command line wins over its environment variable
	// (urfave/cli; k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1: --token EnvVar K3S_TOKEN).
	token := flagOrEnv(f.token, "K3S_TOKEN")
	port := 6443
	if f.httpsPort != "" {
		if port, err = strconv.Atoi(f.httpsPort); err != nil {
			return fmt.Errorf("parsing --https-listen-port %q: %w", f.httpsPort, err)
		}
	}
	ips, err := nodeIPs(f.nodeIPs, systemHost)
	if err != nil {
		return fmt.Errorf("failed to get node name and addresses: %w", err)
	}
	nets, err := serverNetworks(f, ips[0])
	if err != nil {
		return err
	}
	// k3s checks this in the agent half every server runs, after its
	// control plane started; it exits either way.
	if ips, err = agentAddresses(ips, nets.clusterCIDRs, nets.serviceCIDRs); err != nil {
		return err
	}
	serviceCIDR, clusterCIDR := joinIPNets(nets.serviceCIDRs), joinIPNets(nets.clusterCIDRs)
	sans := serverSANs(hostname, f.tlsSANs, ips)
	bind, loopback, apiDefaults := apiserverListen(nets.serviceCIDRs, f.nodeIPs)

	// k3s logs this line before its API server answers; k3d waits for it
	// when (re)starting an init server.
	logf("Running kube-apiserver (stand-in: real kube-apiserver + etcd from %s)", assetsDir())
	srv, err := apiserver.Start(ctx, apiserver.Options{
		AssetsDir:      assetsDir(),
		Dir:            filepath.Join(serverDir, "tls"),
		EtcdDir:        filepath.Join(serverDir, "db", "etcd"),
		SANs:           sans,
		Token:          token,
		BindAddress:    bind,
		SecurePort:     port,
		EtcdClientPort: 2379,
		EtcdPeerPort:   2380,
		KubeconfigHost: loopback.String(),
		ServiceCIDR:    serviceCIDR,
		ExtraArgs:      componentArgs(apiDefaults, f.apiserverArgs),
		// k3s runs etcd and kube-apiserver in-process: their logs are in
		// the container log (proc.go).
		Echo: os.Stderr,
	})
	if err != nil {
		return fmt.Errorf("starting control plane of %s: %w", hostname, err)
	}
	defer srv.Stop()

	localKC := filepath.Join(serverDir, "cred", "admin.kubeconfig")
	if err := writeFile(localKC, srv.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := writeKubeconfig(srv.Kubeconfig, os.Getenv("K3S_KUBECONFIG_OUTPUT"), localKubeconfig); err != nil {
		return err
	}

	logs := filepath.Join(serverDir, "logs")
	kcm, err := startProc("kube-controller-manager", filepath.Join(logs, "kube-controller-manager.log"), true, binPath("kube-controller-manager"),
		controllerManagerArgs(f, localKC, srv, clusterCIDR, serviceCIDR)...)
	if err != nil {
		return err
	}
	sched, err := startProc("kube-scheduler", filepath.Join(logs, "kube-scheduler.log"), true, binPath("kube-scheduler"),
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
		kcm.Stop(unwindGrace)
		return err
	}
	client, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		return fmt.Errorf("building client for local API: %w", err)
	}
	ac := agentConfig{ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, ClusterDNS: joinIPs(nets.clusterDNS), ClusterDomain: firstNonEmpty(f.clusterDomain, "cluster.local")}
	if err := publishAgentConfig(ctx, client, ac); err != nil {
		sched.Stop(unwindGrace)
		kcm.Stop(unwindGrace)
		return err
	}
	node, err := startNode(ctx, nodeOptions{
		name: hostname, ips: ips, apiURL: srv.URL, token: token, caFile: srv.CACertFile,
		clusterDNS: splitList(ac.ClusterDNS), clusterDomain: ac.ClusterDomain, clusterCIDR: ac.ClusterCIDR, flags: f,
	})
	if err != nil {
		sched.Stop(unwindGrace)
		kcm.Stop(unwindGrace)
		return err
	}
	procs := append([]*proc.Process{kcm, sched}, node...)
	// k3s's packaged components (packaged.go), before the lines k3d waits for.
	if err := pk.start(ctx, srv.Config, splitList(ac.ClusterDNS), ac.ClusterDomain); err != nil {
		for _, p := range procs {
			p.Stop(unwindGrace)
		}
		return err
	}
	labels := f.labels()
	// k3s labels its servers control-plane and nothing more (k3s-io/k3s
	// pkg/server/server.go@v1.35.5+k3s1 setNodeLabelsAndAnnotations: the
	// master role label went in k3s #12395).
	labels["node-role.kubernetes.io/control-plane"] = "true"
	keeper := &nodeKeeper{client: client, name: hostname, labels: labels}
	logf("k3s is up and running")
	logf("%s", pk.clusterDNSLine)

	errc := make(chan error, 2)
	go func() { errc <- srv.Wait(ctx) }()
	go func() { _ = keeper.configure(ctx) }()
	err = proc.Supervise(ctx, procs, errc)
	if ctx.Err() != nil {
		logf("shutting down stand-in server")
		return nil
	}
	return err
}

// controllerManagerArgs are k3s's kube-controller-manager flags
// (k3s-io/k3s pkg/daemons/control/server.go@v1.35.5+k3s1 controllerManager):
// node CIDR allocation from --cluster-cidr, service-account credentials
// signed with the API server's key, the cluster CA as root CA. k3s signs
// with its client and server CAs; the stand-in's one CA signs for both.
// Cloud controllers stay off as with k3s's embedded CCM.
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

// nodeName is --node-name (env K3S_NODE_NAME) or the hostname, lower-cased
// as k3s does for Kubernetes (k3s-io/k3s pkg/util/net.go@v1.35.5+k3s1
// GetHostnameAndIPs).
func nodeName(f k3sFlags) (string, error) {
	if n := firstNonEmpty(f.nodeName, os.Getenv("K3S_NODE_NAME")); n != "" {
		return strings.ToLower(n), nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading hostname for node name: %w", err)
	}
	return strings.ToLower(h), nil
}

// flagOrEnv is a k3s flag's value: the command line's, else its
// environment variable's (urfave/cli applies EnvVar as the default).
func flagOrEnv(flag, env string) string { return firstNonEmpty(flag, os.Getenv(env)) }

// serverSANs are the serving certificate's names: k3s's own loopbacks,
// node name and node addresses, and the --tls-san items split at commas
// (k3s-io/k3s pkg/cli/server/server.go@v1.35.5+k3s1); k3d
// passes its API host through --tls-san (k3d-io/k3d
// pkg/client/node.go@v5.9.0 patchServerSpec). 0.0.0.0 and host.k3d.internal
// are the stand-in's, for the rig's host-side clients.
func serverSANs(hostname string, tlsSANs []string, ips []net.IP) []string {
	sans := append([]string{hostname, "0.0.0.0", "127.0.0.1", "::1", "localhost", "host.k3d.internal"}, splitList(tlsSANs...)...)
	for _, a := range ips {
		sans = append(sans, a.String())
	}
	return sans
}

// apiserverListen is where kube-apiserver listens and what the stand-in adds
// to its defaults. k3s serves 6443 from its supervisor and binds
// kube-apiserver to its loopback (::1 when the primary service CIDR is
// IPv6: loopbackFor; k3s-io/k3s pkg/daemons/control/server.go@v1.35.5+k3s1
// apiServer, read at 6a4781ad), setting --advertise-address from
// --node-external-ip, else --node-ip (or --advertise-address; the
// stand-in takes no --node-external-ip, and the product passes none);
// kube-apiserver resolves its advertised address
// from that bind. The stand-in has no supervisor, so kube-apiserver itself
// listens on every address of the loopback's family, from which it
// resolves the same address.
func apiserverListen(serviceCIDRs []*net.IPNet, nodeIPFlags []string) (bind string, loopback net.IP, defaults map[string]string) {
	loopback = loopbackFor(serviceCIDRs)
	bind = "0.0.0.0"
	if loopback.To4() == nil {
		bind = "::"
	}
	defaults = map[string]string{}
	if a := firstValidIP(nodeIPFlags); a != "" {
		defaults["advertise-address"] = a
	}
	return bind, loopback, defaults
}

// writeKubeconfig writes the admin kubeconfig where k3s writes it: at
// K3S_KUBECONFIG_OUTPUT (--write-kubeconfig; k3d sets /output/kubeconfig.yaml,
// k3d-io/k3d pkg/types/defaults.go@v5.9.0 DefaultNodeEnv) with
// /etc/rancher/k3s/k3s.yaml a symlink to it, or at /etc/rancher/k3s/k3s.yaml
// itself without one (k3s-io/k3s pkg/server/server.go@v1.35.5+k3s1
// writeKubeConfig). k3s's kubectl looks there (kubectl.go).
func writeKubeconfig(data []byte, output, global string) error {
	target := firstNonEmpty(output, global)
	if err := writeFile(target, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", target, err)
	}
	if target == global {
		return nil
	}
	if err := os.Remove(global); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("replacing %s by a symlink: %w", global, err)
	}
	if err := os.MkdirAll(filepath.Dir(global), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(target, global); err != nil {
		return fmt.Errorf("linking %s to %s: %w", global, target, err)
	}
	return nil
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
	ClusterCIDR, ServiceCIDR, ClusterDNS, ClusterDomain string
}

func publishAgentConfig(ctx context.Context, client kubernetes.Interface, c agentConfig) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: agentConfigName, Namespace: agentConfigNamespace},
		Data:       map[string]string{"cluster-cidr": c.ClusterCIDR, "service-cidr": c.ServiceCIDR, "cluster-dns": c.ClusterDNS, "cluster-domain": c.ClusterDomain},
	}
	var last error
	// The kube-system namespace appears shortly after the API is ready.
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = client.CoreV1().ConfigMaps(agentConfigNamespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(last) {
			_, last = client.CoreV1().ConfigMaps(agentConfigNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("publishing agent config: %w", last)
	}
	return nil
}

func fetchAgentConfig(ctx context.Context, client kubernetes.Interface) (agentConfig, error) {
	var cm *corev1.ConfigMap
	err := wait.PollUntilContextCancel(ctx, serverRetry, true, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().ConfigMaps(agentConfigNamespace).Get(ctx, agentConfigName, metav1.GetOptions{})
		if err != nil {
			logf("Waiting for the server's agent configuration: %v", err)
			return false, nil
		}
		cm = got
		return true, nil
	})
	if err != nil {
		return agentConfig{}, err
	}
	return agentConfig{ClusterCIDR: cm.Data["cluster-cidr"], ServiceCIDR: cm.Data["service-cidr"], ClusterDNS: cm.Data["cluster-dns"], ClusterDomain: cm.Data["cluster-domain"]}, nil
}
