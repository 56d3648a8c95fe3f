package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

// Paths as k3s lays them out in a node (k3s-io/k3s
// pkg/cli/cmds/agent.go@v1.35.5+k3s1: --data-dir /var/lib/rancher/k3s;
// pkg/agent/config/config.go@v1.35.5+k3s1 get: under <data-dir>/agent
// containerd's root, config and log, the airgap image dir, kubelet's
// kubeconfig and static pod dir; pkg/agent/config/config_linux.go@v1.35.5+k3s1
// applyContainerdOSSpecificConfig: containerd's state and socket).
// kubeletConfigFile and kubeletCertDir are the stand-in's own: k3s writes
// kubelet drop-ins under etc/kubelet.conf.d and sets no cert-dir.
const (
	agentDir          = "/var/lib/rancher/k3s/agent"
	containerdRoot    = agentDir + "/containerd"
	containerdState   = "/run/k3s/containerd"
	containerdSocket  = containerdState + "/containerd.sock"
	containerdConfig  = agentDir + "/etc/containerd/config.toml"
	containerdLog     = containerdRoot + "/containerd.log"
	airgapImagesDir   = agentDir + "/images"
	kubeletKubeconfig = agentDir + "/kubelet.kubeconfig"
	kubeletConfigFile = agentDir + "/etc/kubelet.conf"
	kubeletCertDir    = agentDir + "/kubelet-pki"
	// k3s hands kubelet a serving certificate by these names
	// (k3s-io/k3s pkg/agent/config/config.go@v1.35.5+k3s1 ServingKubeletCert/Key,
	// set as tlsCertFile/tlsPrivateKeyFile by pkg/daemons/agent/agent.go@v1.35.5+k3s1
	// defaultKubeletConfig).
	servingKubeletCert = agentDir + "/serving-kubelet.crt"
	servingKubeletKey  = agentDir + "/serving-kubelet.key"
	podManifestsDir    = agentDir + "/pod-manifests"

	// With --flannel-backend=none (the only backend the stand-in takes)
	// k3s sets no CNI dirs (k3s-io/k3s pkg/executor/embed/embed.go@v1.35.5+k3s1
	// sets them for its flannel only), its containerd template then has no
	// cni section (pkg/agent/templates/templates.go@v1.35.5+k3s1), and
	// containerd uses these, its defaults (containerd/containerd
	// internal/cri/config/config_unix.go@v2.2.3).
	cniBinDir  = "/opt/cni/bin"
	cniConfDir = "/etc/cni/net.d"

	// defaultPauseImage is k3s's sandbox image, pulled at run time as k3s
	// pulls it (through the lane's "*" mirror when it has one): v1.35.5 still
	// pins pause 3.6 (k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1:
	// --pause-image defaults to rancher/mirrored-pause:3.6; k3s-io/k3s issue
	// 14384 bumps it from v1.35.6 on), and the rancher/k3s image carries no
	// airgap image of it. --pause-image overrides it as in k3s. The product
	// lists the same name (pkg/provider K3sPauseImage; a test keeps the two
	// equal).
	defaultPauseImage = "docker.io/rancher/mirrored-pause:3.6"
)

// nodeOptions is what kubelet needs to join: where the API server is and
// how this node is named, labelled and addressed.
type nodeOptions struct {
	name          string
	ips           []net.IP // the primary cluster CIDR's family first
	apiURL        string
	token         string
	caFile        string   // "" trusts the server without verification
	clusterDNS    []string // one address per service CIDR
	clusterDomain string
	clusterCIDR   string // comma-separated
	flags         k3sFlags
}

// ipv6First is whether the node's first address, the one k3s derives its
// listen and health addresses from, is IPv6.
func (o nodeOptions) ipv6First() bool { return len(o.ips) > 0 && o.ips[0].To4() == nil }

// startNode starts containerd, imports the airgap images, protects the
// host's sysctls and starts kubelet: the agent half every k3s node runs.
func startNode(ctx context.Context, o nodeOptions) ([]*proc.Process, error) {
	for _, d := range []string{cniBinDir, cniConfDir, podManifestsDir, filepath.Dir(containerdConfig), kubeletCertDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	pause := firstNonEmpty(o.flags.pauseImage, defaultPauseImage)
	mirrored, err := writeRegistryHosts()
	if err != nil {
		return nil, fmt.Errorf("registry mirrors: %w", err)
	}
	if err := writeFile(containerdConfig, containerdConfigTOML(pause, mirrored), 0o600); err != nil {
		return nil, fmt.Errorf("writing containerd config: %w", err)
	}
	ctrd, err := startProc("containerd", containerdLog, false, binPath("containerd"), "--config", containerdConfig, "--log-level", "info")
	if err != nil {
		return nil, err
	}
	procs := []*proc.Process{ctrd}
	fail := func(err error) ([]*proc.Process, error) {
		ctrd.Stop(unwindGrace)
		return nil, err
	}
	if err := waitSocket(ctx, ctrd, containerdSocket, 60*time.Second); err != nil {
		return fail(err)
	}
	if err := waitCRI(ctx, ctrd, containerdSocket); err != nil {
		return fail(err)
	}
	logf("Containerd is now running")
	if err := importAirgapImages(ctx); err != nil {
		return fail(err)
	}
	if err := protectHostSysctls(); err != nil {
		return fail(err)
	}
	if err := writeKubeletFiles(o); err != nil {
		return fail(err)
	}
	kubelet, err := startProc("kubelet", "", true, binPath("kubelet"), kubeletArgs(o)...)
	if err != nil {
		return fail(err)
	}
	procs = append(procs, kubelet)
	proxy, err := startProc("kube-proxy", filepath.Join(agentDir, "logs", "kube-proxy.log"), true, binPath("kube-proxy"), kubeProxyArgs(o)...)
	if err != nil {
		kubelet.Stop(unwindGrace)
		return fail(err)
	}
	return append(procs, proxy), nil
}

// kubeProxyArgs are k3s's kube-proxy flags (k3s-io/k3s
// pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1 kubeProxyArgs): iptables mode,
// health on the loopback of the node address's family, every cluster CIDR,
// and conntrack limits left alone (0): nf_conntrack_max and the timeouts are
// not namespaced, a node in a container must not set them.
func kubeProxyArgs(o nodeOptions) []string {
	return componentArgs(map[string]string{
		"proxy-mode":                        "iptables",
		"healthz-bind-address":              o.loopback(),
		"kubeconfig":                        kubeletKubeconfig,
		"cluster-cidr":                      o.clusterCIDR,
		"conntrack-max-per-core":            "0",
		"conntrack-tcp-timeout-established": "0s",
		"conntrack-tcp-timeout-close-wait":  "0s",
		"hostname-override":                 o.name,
	}, o.flags.kubeProxyArgs)
}

func binPath(name string) string { return filepath.Join(assetsDir(), name) }

// loopback and listenAddress follow the family of the node's first
// address: k3s binds kubelet's and kube-proxy's health to ::1 on an IPv6
// node and kubelet's server to :: (k3s-io/k3s
// pkg/daemons/agent/agent.go@v1.35.5+k3s1 defaultKubeletConfig,
// agent_linux.go@v1.35.5+k3s1 kubeProxyArgs; pkg/util/net.go@v1.35.5+k3s1
// GetDefaultAddresses).
func (o nodeOptions) loopback() string {
	if o.ipv6First() {
		return "::1"
	}
	return "127.0.0.1"
}

func (o nodeOptions) listenAddress() string {
	if o.ipv6First() {
		return "::"
	}
	return "0.0.0.0"
}

// containerdConfigTOML follows what k3s's template sets for a node on
// cgroupfs with --flannel-backend=none (k3s-io/k3s
// pkg/agent/templates/templates.go@v1.35.5+k3s1 ContainerdConfigTemplateV3,
// filled in by pkg/agent/containerd/config_linux.go@v1.35.5+k3s1): overlayfs,
// the pinned sandbox image, runc v2 without systemd cgroups, the standard
// CNI dirs (containerd's defaults, which k3s leaves). One
// deviation, derived from the machine rather than set for the rig:
// restrict_oom_score_adj is on when this process lacks CAP_SYS_RESOURCE
// (k3s turns it on in a user namespace, as rootless, where the same
// capability is missing):
// without it every pod sandbox fails to set its -998 oom_score_adj.
//
// With registries.yaml present, config_path points CRI's image service at
// the hosts files k3s renders from it (registries.go).
func containerdConfigTOML(pauseImage string, mirrored bool) []byte {
	restrict := !hasCapSysResource()
	registry := ""
	if mirrored {
		registry = fmt.Sprintf("  [plugins.'io.containerd.cri.v1.images'.registry]\n    config_path = %q\n", registryDir)
	}
	return []byte(fmt.Sprintf(`# Written by the sriov-lane stand-in k3s; regenerated at every start.
version = 4
root = %q
state = %q

[plugins.'io.containerd.server.v1.grpc']
  address = %q

[plugins.'io.containerd.server.v1.ttrpc']
  address = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q
%s
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  restrict_oom_score_adj = %t
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '10010'
`, containerdRoot, containerdState, containerdSocket, containerdSocket+".ttrpc", pauseImage, registry, restrict, cniBinDir, cniConfDir, binPath("runc")))
}

func hasCapSysResource() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	const capSysResource = 24
	return data[0].Effective&(1<<capSysResource) != 0
}

const socketPoll = 100 * time.Millisecond

func waitSocket(ctx context.Context, p *proc.Process, path string, timeout time.Duration) error {
	err := proc.WaitReady(ctx, []*proc.Process{p}, socketPoll, timeout, func(context.Context) bool {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	if errors.Is(err, proc.ErrNotReady) {
		return fmt.Errorf("%s did not open %s within %s; log %s:\n%s", p.Name, path, timeout, p.LogPath, proc.Tail(p.LogPath, 3000))
	}
	return err
}

// waitCRI returns once containerd's CRI answers Version, as k3s waits
// before it starts kubelet (k3s-io/k3s pkg/agent/containerd/containerd.go
// Run: cri.WaitForService, stored commit 8fed810c; pkg/agent/cri/cri.go
// WaitForService, a try a second until ctx ends, "Waiting for containerd
// startup" from the second, stored commit 27bcc052; pkg/agent/cri/cri_linux.go
// Connection: a Version call, dialled for at most 3 s, stored commit
// 20b50426). An open socket is not enough: containerd 2.x answers "server
// is not initialized yet" until its CRI plugin is up, kubelet refuses to
// start on that, and a node whose kubelet exits restarts in a new netns,
// away from the PFs moved into it (seen in make test).
func waitCRI(ctx context.Context, p *proc.Process, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("CRI client of %s: %w", socket, err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	first := true
	return proc.WaitReady(ctx, []*proc.Process{p}, time.Second, 0, func(ctx context.Context) bool {
		vctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := rs.Version(vctx, &runtimeapi.VersionRequest{Version: "0.1.0"})
		cancel()
		if err != nil && !first {
			logf("Waiting for containerd startup: %v", err)
		}
		first = false
		return err == nil
	})
}

// importAirgapImages imports every image tarball under the agent's images
// directory into the k8s.io namespace at start, as k3s does with its
// airgap images (k3s-io/k3s pkg/agent/containerd/containerd.go@v1.35.5+k3s1
// PreloadImages).
func importAirgapImages(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(airgapImagesDir, "*.tar"))
	if err != nil || len(files) == 0 {
		return err
	}
	for _, f := range files {
		start := time.Now()
		cmd := exec.CommandContext(ctx, binPath("ctr"), "--address", containerdSocket, "--namespace", "k8s.io", "images", "import", "--all-platforms", f)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s: %v: %s", f, err, out)
		}
		logf("Imported images from %s in %s", f, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// hostSysctls are the non-namespaced sysctls kubelet sets at start
// (k8s.io/kubernetes pkg/kubelet/cm/container_manager_linux.go@v1.36.3
// setupKernelTunables; names in k8s.io/component-helpers
// node/util/sysctl/sysctl.go@v0.36.3). Written in a privileged node they
// change the host. The stand-in binds a private file over each first, so
// kubelet reads and writes that file instead of the rig host's kernel.
var hostSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func protectHostSysctls() error {
	dir := "/run/k3s-standin/sysctl"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range hostSysctls {
		target := "/proc/sys/" + s
		cur, err := os.ReadFile(target)
		if err != nil {
			return fmt.Errorf("reading %s: %w", target, err)
		}
		shadow := filepath.Join(dir, strings.ReplaceAll(s, "/", "."))
		if err := os.WriteFile(shadow, cur, 0o644); err != nil {
			return err
		}
		if err := unix.Mount(shadow, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("refusing to start kubelet: cannot shield host sysctl %s (bind mount: %w)", target, err)
		}
	}
	logf("Shielded host sysctls from kubelet: %s", strings.Join(hostSysctls, " "))
	return nil
}

// kubeletConfig is a KubeletConfiguration with the values k3s sets by
// default (k3s-io/k3s pkg/daemons/agent/agent.go@v1.35.5+k3s1
// defaultKubeletConfig and agent_linux.go@v1.35.5+k3s1 kubeletArgsAndConfig):
// cgroupfs driver, no swap check, cluster DNS at the 10th service address,
// 5% disk eviction, serialised pulls off, the static pod dir. Authentication and authorisation differ: k3s gives kubelet a client
// CA and webhook modes; the stand-in API server has no kubelet client
// certificate, so kubelet allows the node-local network (stand-in only).
// As with k3s, kubelet gets a serving certificate and does not make its
// own (two RSA keys, a good part of its start on a loaded rig).
func kubeletConfig(o nodeOptions, resolvConf string) string {
	var dns strings.Builder
	for _, ip := range o.clusterDNS {
		fmt.Fprintf(&dns, "- %q\n", ip)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
clusterDNS:
%sclusterDomain: %s
containerRuntimeEndpoint: unix://%s
evictionHard:
  imagefs.available: 5%%
  nodefs.available: 5%%
evictionMinimumReclaim:
  imagefs.available: 10%%
  nodefs.available: 10%%
failSwapOn: false
healthzBindAddress: %q
resolvConf: %s
serializeImagePulls: false
staticPodPath: %s
tlsCertFile: %s
tlsPrivateKeyFile: %s
`, o.listenAddress(), dns.String(), o.clusterDomain, containerdSocket, o.loopback(), resolvConf, podManifestsDir, servingKubeletCert, servingKubeletKey)
}

// generatedResolvConf is where k3s writes a resolv.conf for kubelet when the
// node's own names no usable nameserver.
const generatedResolvConf = agentDir + "/etc/resolv.conf"

// kubeletResolvConf is the resolv.conf k3s hands kubelet (k3s-io/k3s
// pkg/agent/config/config.go@v1.35.5+k3s1 locateOrGenerateResolvConf): the
// first of candidates whose every nameserver is a global unicast address or
// the instance metadata address (at least one), else a generated file
// naming 8.8.8.8 and 2001:4860:4860::8888. A node whose k3d DNS fix did not
// apply still names Docker's 127.0.0.11 and so gets the generated file, as
// on a real node.
func kubeletResolvConf(candidates []string, generated string) (string, error) {
	for _, c := range candidates {
		if validResolvConf(c) {
			return c, nil
		}
	}
	if err := writeFile(generated, []byte(generatedNameservers), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", generated, err)
	}
	logf("Host resolv.conf includes loopback, multicast, or link-local nameservers - kubelet will use autogenerated resolv.conf with nameservers 8.8.8.8 2001:4860:4860::8888")
	return generated, nil
}

// generatedNameservers is the file k3s generates, and instanceMetadataIP
// the one address it accepts that is not global unicast (cloud providers'
// private DNS goes through it), both k3s-io/k3s
// pkg/agent/config/config.go@v1.35.5+k3s1 (InstanceMetadataServiceIP,
// isValidNameserver).
const generatedNameservers = "nameserver 8.8.8.8\nnameserver 2001:4860:4860::8888\n"

var instanceMetadataIP = net.ParseIP("169.254.169.254")

func validResolvConf(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		// k3s matches ^nameserver\s+(\S*) on each line.
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "nameserver" || !strings.HasPrefix(line, "nameserver") {
			continue
		}
		if ip := net.ParseIP(fields[1]); ip == nil || !ip.IsGlobalUnicast() && !ip.Equal(instanceMetadataIP) {
			return false
		}
		found = true
	}
	return found
}

func writeKubeletFiles(o nodeOptions) error {
	resolvConf, err := kubeletResolvConf([]string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}, generatedResolvConf)
	if err != nil {
		return err
	}
	if err := writeFile(kubeletConfigFile, []byte(kubeletConfig(o, resolvConf)), 0o600); err != nil {
		return err
	}
	if err := writeServingCert(o); err != nil {
		return err
	}
	cluster := "    insecure-skip-tls-verify: true\n"
	if o.caFile != "" {
		cluster = "    certificate-authority: " + o.caFile + "\n"
	}
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: " + o.apiURL + "\n" + cluster +
		"users:\n- name: kubelet\n  user:\n    token: " + o.token + "\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: kubelet\ncurrent-context: local\n"
	return writeFile(kubeletKubeconfig, []byte(kc), 0o600)
}

// kubeletArgs are k3s's kubelet flags for this node (k3s-io/k3s
// pkg/daemons/agent/agent_linux.go@v1.35.5+k3s1 kubeletArgsAndConfig) merged with
// --kubelet-arg items as k3s merges them (componentArgs). Every --node-label
// goes to --node-labels unchanged, joined with commas, so kubelet refuses a
// label it may not set as it does under k3s. k3s runs its cloud controller
// by default and gives kubelet cloud-provider=external with every node
// address; the stand-in runs none (kubelet would keep the Node tainted
// uninitialised), so it passes the addresses alone, which kubelet then
// reports as the k3s controller would.
func kubeletArgs(o nodeOptions) []string {
	defaults := map[string]string{
		"config":            kubeletConfigFile,
		"kubeconfig":        kubeletKubeconfig,
		"hostname-override": o.name,
		"read-only-port":    "0",
		"cert-dir":          kubeletCertDir,
		"node-labels":       strings.Join(o.flags.nodeLabels, ","),
	}
	if len(o.ips) > 0 {
		defaults["node-ip"] = joinIPs(o.ips)
	}
	if len(o.flags.nodeTaints) > 0 {
		defaults["register-with-taints"] = strings.Join(o.flags.nodeTaints, ",")
	}
	if containerized("/proc/1/cgroup") {
		defaults["kubelet-cgroups"] = "/k3s"
		defaults["runtime-cgroups"] = "/k3s"
	}
	return componentArgs(defaults, o.flags.kubeletArgs)
}

// containerized mirrors k3s's test for running in a container (k3s-io/k3s
// pkg/cgroups/cgroups_linux.go@v1.35.5+k3s1 CheckCgroups): PID 1's systemd (v1) or
// unified (v2) cgroup is neither / nor /init.scope. k3s then gives kubelet
// and the runtime their own /k3s cgroup.
func containerized(procCgroup string) bool {
	data, err := os.ReadFile(procCgroup)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		if parts[1] == "name=systemd" || (parts[0] == "0" && parts[1] == "") {
			if parts[2] != "/" && parts[2] != "/init.scope" {
				return true
			}
		}
	}
	return false
}

// writeServingCert gives kubelet an ECDSA P-256 serving certificate for the
// node's name and address, kept across restarts as k3s keeps its own. k3s
// has its server CA sign it; the stand-in agent holds no CA key, so it is
// self-signed (nothing on the rig verifies kubelet's certificate: the API
// server is not given a kubelet CA, as in k3s).
func writeServingCert(o nodeOptions) error {
	if _, err := os.Stat(servingKubeletCert); err == nil {
		if _, err := os.Stat(servingKubeletKey); err == nil {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: o.name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{o.name, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	tmpl.IPAddresses = append(tmpl.IPAddresses, o.ips...)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(servingKubeletKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeFile(servingKubeletCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
