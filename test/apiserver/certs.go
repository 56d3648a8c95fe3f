package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the PEM files one control plane needs, written into a directory.
type pki struct {
	caCertPEM            []byte
	caCertFile           string
	caKeyFile            string
	servingCertFile      string
	servingKeyFile       string
	serviceAccountPub    string
	serviceAccountSigner string
}

// writePKI creates a CA, a serving certificate valid for sans (plus
// loopback and the in-cluster service names) and a service-account key pair.
// A CA and service-account key already in dir are reused, so a restarted
// control plane (a stand-in node container restarting) keeps accepting the
// kubeconfigs and tokens handed out before; the serving certificate is
// always renewed because the node's address may have changed. ECDSA keeps
// generation in the milliseconds.
func writePKI(dir string, sans []string) (*pki, error) {
	caKeyFile := filepath.Join(dir, "ca.key")
	caKey, caCert, caDER, err := loadCA(filepath.Join(dir, "ca.crt"), caKeyFile)
	if err != nil {
		if caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("generating CA key: %w", err)
		}
		if caCert, caDER, err = selfSign(caKey); err != nil {
			return nil, err
		}
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	srvTmpl := certTemplate(2, "kube-apiserver", x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment)
	srvTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	all := append([]string{"127.0.0.1", "localhost", "::1",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, sans...)
	seen := map[string]bool{}
	for _, s := range all {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		if ip := net.ParseIP(s); ip != nil {
			srvTmpl.IPAddresses = append(srvTmpl.IPAddresses, ip)
		} else {
			srvTmpl.DNSNames = append(srvTmpl.DNSNames, s)
		}
	}
	// Serial numbers must differ between renewals signed by one CA.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("drawing serial number: %w", err)
	}
	srvTmpl.SerialNumber = serial.Add(serial, big.NewInt(2))
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate: %w", err)
	}

	saKey, err := loadECKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		if saKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("generating service-account key: %w", err)
		}
	}

	p := &pki{
		caCertPEM:            pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caCertFile:           filepath.Join(dir, "ca.crt"),
		caKeyFile:            caKeyFile,
		servingCertFile:      filepath.Join(dir, "serving.crt"),
		servingKeyFile:       filepath.Join(dir, "serving.key"),
		serviceAccountPub:    filepath.Join(dir, "sa.pub"),
		serviceAccountSigner: filepath.Join(dir, "sa.key"),
	}
	caKeyPEM, err := ecKeyPEM(caKey)
	if err != nil {
		return nil, err
	}
	srvKeyPEM, err := ecKeyPEM(srvKey)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := ecKeyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	files := map[string][]byte{
		p.caCertFile:           p.caCertPEM,
		caKeyFile:              caKeyPEM,
		p.servingCertFile:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		p.servingKeyFile:       srvKeyPEM,
		p.serviceAccountSigner: saKeyPEM,
		p.serviceAccountPub:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return p, nil
}

func ecKeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding EC key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// certTemplate is a certificate of the control plane's PKI: valid from an
// hour ago for ten years.
func certTemplate(serial int64, commonName string, usage x509.KeyUsage) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     usage,
	}
}

func selfSign(caKey *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	tmpl := certTemplate(1, "sriov-lane-test-ca", x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature)
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return cert, der, nil
}

// loadCA reads a CA written by an earlier start; any problem means "none".
func loadCA(certFile, keyFile string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := loadECKey(keyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, nil, fmt.Errorf("no certificate in %s", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	return key, cert, block.Bytes, nil
}

func loadECKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("no EC private key in %s", path)
	}
	return x509.ParseECPrivateKey(block.Bytes)
}
