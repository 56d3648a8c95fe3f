// Package apiserver runs a real etcd and kube-apiserver from prebuilt
// binaries (built by `make test-env`), for tests and for the stand-in k3s
// node image. Nothing here is product code.
package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// DefaultServiceCIDR matches k3s's default so in-cluster addresses look familiar.
	DefaultServiceCIDR = "10.43.0.0/16"
	// AdminUser is the identity the static token authenticates as.
	AdminUser = "admin"
	// contextName names cluster, user and context in the kubeconfig, as k3s does.
	contextName = "default"
)

// Options configures one control plane. Zero values pick safe defaults.
type Options struct {
	// AssetsDir holds the kube-apiserver and etcd binaries.
	AssetsDir string
	// Dir receives certificates, data and logs; a temporary directory
	// (removed by Stop) is used when empty. A given Dir is kept.
	Dir string
	// SANs are extra DNS names or IPs for the serving certificate.
	SANs []string
	// Token is the static bearer token for AdminUser; random when empty.
	Token string
	// BindAddress is where kube-apiserver listens (default 127.0.0.1).
	BindAddress string
	// SecurePort, EtcdClientPort and EtcdPeerPort default to free ports.
	SecurePort, EtcdClientPort, EtcdPeerPort int
	// KubeconfigHost is the host written into the kubeconfig's server URL
	// (default 127.0.0.1).
	KubeconfigHost string
	// ReadyTimeout bounds the wait for /readyz (default 90 s).
	ReadyTimeout time.Duration
	// ServiceCIDR is the service cluster IP range (default DefaultServiceCIDR);
	// its first address is a SAN of the serving certificate.
	ServiceCIDR string
	// ExtraArgs are appended to kube-apiserver's arguments (later flags win).
	ExtraArgs []string
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
	etcd      *process
	apiserver *process
}

// process is a child with its exit observed in the background, so a crash
// during start-up is reported at once instead of after the ready timeout.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startProcess(name, logPath string, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log %s: %w", name, logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group: a test's Ctrl-C must not race our orderly Stop, and
	// Stop can signal anything the binary forks. No Pdeathsig: it fires when
	// the spawning OS thread exits, which Go does when any goroutine locked
	// to a thread (netns code) ends - the child would die at random.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks politely, then kills after a grace period.
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the end of a log file for error messages.
func logTail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
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
	serviceIP, err := FirstIP(opts.ServiceCIDR)
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
	for _, port := range []*int{&opts.SecurePort, &opts.EtcdClientPort, &opts.EtcdPeerPort} {
		if *port == 0 {
			if *port, err = freePort(); err != nil {
				return nil, err
			}
		}
	}

	s := &Server{Token: opts.Token, Dir: opts.Dir}
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
	s.etcd, err = startProcess("etcd", filepath.Join(s.Dir, "etcd.log"), etcdBin,
		"--name=default",
		"--data-dir="+filepath.Join(s.Dir, "etcd"),
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
	s.apiserver, err = startProcess("kube-apiserver", filepath.Join(s.Dir, "kube-apiserver.log"), apiserverBin,
		append(apiserverArgs, opts.ExtraArgs...)...)
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
	deadline := time.Now().Add(timeout)
	lastErr := errors.New("no answer yet")
	for {
		for _, p := range []*process{s.etcd, s.apiserver} {
			if p.exited() {
				return fmt.Errorf("%s exited during start-up (%v); log %s:\n%s", p.name, p.err, p.logPath, logTail(p.logPath, 4000))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("/readyz answered %s", resp.Status)
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver at %s not ready after %s: %v; log %s:\n%s", s.URL, timeout, lastErr, s.apiserver.logPath, logTail(s.apiserver.logPath, 4000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for kube-apiserver at %s: %w", s.URL, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Logs returns the tails of both logs, for test failure messages.
func (s *Server) Logs() string {
	var b strings.Builder
	for _, p := range []*process{s.etcd, s.apiserver} {
		if p != nil {
			fmt.Fprintf(&b, "==> %s <==\n%s\n", p.logPath, logTail(p.logPath, 8000))
		}
	}
	return b.String()
}

// Stop ends kube-apiserver, then etcd, and removes a temporary directory.
// It is safe to call more than once.
func (s *Server) Stop() {
	s.apiserver.stop(5 * time.Second)
	s.etcd.stop(5 * time.Second)
	if s.removeDir && s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
	}
}

// Wait returns when either child exits, with the reason.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.etcd.done:
		return fmt.Errorf("etcd exited: %v; log:\n%s", s.etcd.err, logTail(s.etcd.logPath, 4000))
	case <-s.apiserver.done:
		return fmt.Errorf("kube-apiserver exited: %v; log:\n%s", s.apiserver.err, logTail(s.apiserver.logPath, 4000))
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

// freePort asks the kernel for an unused loopback port. Another process can
// take it before we bind; tests accept that small race.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
