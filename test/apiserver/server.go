package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sriov-lane/sriov-lane/test/proc"
)

const (
	// DefaultServiceCIDR matches k3s's default so in-cluster addresses look familiar.
	DefaultServiceCIDR = "10.43.0.0/16"
	// AdminUser is the identity the static token authenticates as.
	AdminUser = "admin"
	// contextName names cluster, user and context in the kubeconfig, as k3s
	// names them (k3s-io/k3s pkg/clientaccess/kubeconfig.go@v1.35.5+k3s1
	// WriteClientKubeConfig, read at 6a4781ad).
	contextName = "default"
)

// Options configures one control plane. Zero values pick safe defaults.
type Options struct {
	// AssetsDir holds the kube-apiserver and etcd binaries.
	AssetsDir string
	// Dir receives certificates, data and logs; a temporary directory
	// (removed by Stop) is used when empty. A given Dir is kept.
	Dir string
	// EtcdDir is etcd's data dir (default Dir/etcd). Apart from Dir, the
	// data can go while the credentials stay, as a restarted k3s server
	// whose datastore was on a tmpfs keeps its certificates.
	EtcdDir string
	// SANs are extra DNS names or IPs for the serving certificate.
	SANs []string
	// Token is the static bearer token for AdminUser; random when empty.
	Token string
	// BindAddress is where kube-apiserver listens (default 127.0.0.1).
	BindAddress string
	// SecurePort, EtcdClientPort and EtcdPeerPort are required: the
	// stand-in k3s gives k3s's, tests a test slot's (TestOptions).
	SecurePort, EtcdClientPort, EtcdPeerPort int
	// KubeconfigHost is the host written into the kubeconfig's server URL
	// (default 127.0.0.1).
	KubeconfigHost string
	// ReadyTimeout bounds the wait for /readyz (default 90 s).
	ReadyTimeout time.Duration
	// ServiceCIDR is the service cluster IP range, one CIDR or a
	// comma-separated dual-stack pair (default DefaultServiceCIDR); the
	// first address of the first is a SAN of the serving certificate.
	ServiceCIDR string
	// ExtraArgs are appended to kube-apiserver's arguments (later flags win).
	ExtraArgs []string
	// Echo also receives etcd's and kube-apiserver's output, which always
	// goes to etcd.log and kube-apiserver.log in Dir: the stand-in k3s
	// passes its stderr, where k3s's in-process components log.
	Echo io.Writer
}

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// Config reaches the API server as AdminUser.
	Config *rest.Config
	// Kubeconfig is a kubeconfig for Config (cluster/user/context "default").
	Kubeconfig []byte
	// URL is the API server's https URL.
	URL string
	// Token is the admin bearer token.
	Token string
	// Dir holds certificates, data and the etcd.log/kube-apiserver.log files.
	Dir string
	// CACertFile and CAKeyFile are the cluster CA (PEM); ServiceAccountKeyFile
	// is the private key service-account tokens are signed with. A
	// controller-manager needs all three.
	CACertFile, CAKeyFile, ServiceAccountKeyFile string

	removeDir bool
	etcd      *proc.Process
	apiserver *proc.Process
	// echo also receives both children's output (Options.Echo).
	echo io.Writer
}

// Start launches etcd and kube-apiserver and waits until /readyz answers 200.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.AssetsDir == "" {
		return nil, errors.New("starting control plane: no assets directory given")
	}
	apiserverBin := filepath.Join(opts.AssetsDir, "kube-apiserver")
	etcdBin := filepath.Join(opts.AssetsDir, "etcd")
	for _, b := range []string{apiserverBin, etcdBin} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("starting control plane: binary missing (run `make test-env`): %w", err)
		}
	}
	if opts.BindAddress == "" {
		opts.BindAddress = "127.0.0.1"
	}
	if opts.KubeconfigHost == "" {
		opts.KubeconfigHost = "127.0.0.1"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	// A dual-stack range is "v4,v6": the kubernetes Service takes its
	// address from the first (kube-apiserver's primary range).
	primary, _, _ := strings.Cut(opts.ServiceCIDR, ",")
	serviceIP, err := FirstIP(primary)
	if err != nil {
		return nil, fmt.Errorf("starting control plane: service CIDR: %w", err)
	}
	if opts.Token == "" {
		if opts.Token, err = randomToken(); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(opts.Token, ",\"\n\r") {
		return nil, errors.New("starting control plane: token must not contain commas, quotes or newlines (static token file format)")
	}
	if opts.SecurePort == 0 || opts.EtcdClientPort == 0 || opts.EtcdPeerPort == 0 {
		return nil, fmt.Errorf("starting control plane: ports %d (kube-apiserver), %d and %d (etcd): all three are required", opts.SecurePort, opts.EtcdClientPort, opts.EtcdPeerPort)
	}

	s := &Server{Token: opts.Token, Dir: opts.Dir, echo: opts.Echo}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "sriov-lane-apiserver-"); err != nil {
			return nil, fmt.Errorf("creating control-plane directory: %w", err)
		}
		s.removeDir = true
	} else if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating control-plane directory %s: %w", s.Dir, err)
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	if opts.EtcdDir == "" {
		opts.EtcdDir = filepath.Join(s.Dir, "etcd")
	}
	certs, err := writePKI(s.Dir, append([]string{serviceIP.String()}, opts.SANs...))
	if err != nil {
		return nil, fmt.Errorf("writing control-plane certificates in %s: %w", s.Dir, err)
	}
	s.CACertFile, s.CAKeyFile, s.ServiceAccountKeyFile = certs.caCertFile, certs.caKeyFile, certs.serviceAccountSigner
	tokenFile := filepath.Join(s.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", opts.Token, AdminUser, AdminUser)), 0o600); err != nil {
		return nil, fmt.Errorf("writing token file: %w", err)
	}

	etcdClient := "http://127.0.0.1:" + strconv.Itoa(opts.EtcdClientPort)
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(opts.EtcdPeerPort)
	s.etcd, err = s.start("etcd", etcdBin,
		"--name=default",
		"--data-dir="+opts.EtcdDir,
		"--listen-client-urls="+etcdClient,
		"--advertise-client-urls="+etcdClient,
		"--listen-peer-urls="+etcdPeer,
		"--initial-advertise-peer-urls="+etcdPeer,
		"--initial-cluster=default="+etcdPeer,
		// Test data is disposable; fsync only slows the shared disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}

	apiserverArgs := []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=" + opts.BindAddress,
		"--secure-port=" + strconv.Itoa(opts.SecurePort),
		"--tls-cert-file=" + certs.servingCertFile,
		"--tls-private-key-file=" + certs.servingKeyFile,
		"--client-ca-file=" + certs.caCertFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + opts.ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.serviceAccountPub,
		"--service-account-signing-key-file=" + certs.serviceAccountSigner,
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(s.Dir, "apiserver-certs"),
		"--v=1",
	}
	s.apiserver, err = s.start("kube-apiserver", apiserverBin, append(apiserverArgs, opts.ExtraArgs...)...)
	if err != nil {
		return nil, err
	}

	s.URL = "https://" + net.JoinHostPort(opts.KubeconfigHost, strconv.Itoa(opts.SecurePort))
	s.Config = &rest.Config{
		Host:            s.URL,
		BearerToken:     opts.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certs.caCertPEM},
		QPS:             100,
		Burst:           200,
	}
	if s.Kubeconfig, err = kubeconfig(s.URL, certs.caCertPEM, opts.Token); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, opts.ReadyTimeout); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz; it gives up early when a child has died.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	tr, err := rest.TransportFor(s.Config)
	if err != nil {
		return fmt.Errorf("building readiness client: %w", err)
	}
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	var lastErr error
	err = proc.WaitReady(ctx, []*proc.Process{s.etcd, s.apiserver}, 200*time.Millisecond, timeout, func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			lastErr = err
			return false
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
		lastErr = fmt.Errorf("/readyz answered %s", resp.Status)
		return false
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, proc.ErrNotReady):
		return fmt.Errorf("kube-apiserver at %s not ready after %s: %v; log %s:\n%s", s.URL, timeout, lastErr, s.apiserver.LogPath, proc.Tail(s.apiserver.LogPath, 4000))
	case errors.Is(err, ctx.Err()):
		return fmt.Errorf("waiting for kube-apiserver at %s: %w", s.URL, err)
	default: // a child exited, which WaitReady reports before ctx's end
		return fmt.Errorf("during start-up: %w", err)
	}
}

// Logs returns the tails of both logs, for test failure messages.
func (s *Server) Logs() string {
	var b strings.Builder
	for _, p := range []*proc.Process{s.etcd, s.apiserver} {
		if p != nil {
			fmt.Fprintf(&b, "==> %s <==\n%s\n", p.LogPath, proc.Tail(p.LogPath, 8000))
		}
	}
	return b.String()
}

// stopGrace is how long Stop waits for each child after SIGTERM before
// killing it: a test's etcd and kube-apiserver hold little state, so one
// still running after this is stuck.
const stopGrace = 5 * time.Second

// start runs one child with its output in Dir/<name>.log.
func (s *Server) start(name, bin string, args ...string) (*proc.Process, error) {
	return proc.Start(proc.Spec{Name: name, Bin: bin, Args: args, LogPath: filepath.Join(s.Dir, name+".log"), Echo: s.echo})
}

// Stop ends kube-apiserver, then etcd, and removes a temporary directory.
// It is safe to call more than once.
func (s *Server) Stop() {
	s.apiserver.Stop(stopGrace)
	s.etcd.Stop(stopGrace)
	if s.removeDir && s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
	}
}

// Wait returns when either child exits, with the reason.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.etcd.Done():
		return s.etcd.ExitError()
	case <-s.apiserver.Done():
		return s.apiserver.ExitError()
	}
}

func kubeconfig(url string, ca []byte, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return data, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// FirstIP is the first host address of a CIDR (10.43.0.1 for 10.43.0.0/16),
// the address the "kubernetes" Service gets.
func FirstIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, err
	}
	ip := append(net.IP(nil), n.IP...)
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	ip[len(ip)-1]++
	if !n.Contains(ip) {
		return nil, fmt.Errorf("%s has no host addresses", cidr)
	}
	return ip, nil
}
