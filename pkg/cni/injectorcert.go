package cni

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// The webhook's certificate. Upstream's installer init container makes a
// CA and a serving certificate in each pod and writes its own
// MutatingWebhookConfiguration (k8snetworkplumbingwg/network-resources-injector
// pkg/installer/installer.go@v1.9.0); the lane
// makes them instead, on the host, once per up, so the objects it applies
// are all its own and plan can show them. Nothing is written to disk: the
// key goes to the API server in the Secret and nowhere else.

// WebhookCertValidity is how long the CA and the serving certificate are
// valid from their creation (NotBefore is an hour earlier, for clock skew).
// Ten years: a lane is torn down long before, and a retained lane must not
// stop admitting pods because its webhook certificate expired.
const WebhookCertValidity = 10 * 365 * 24 * time.Hour

// WebhookCert is a webhook's serving certificate and the CA that signed it,
// PEM encoded. Its String and GoString never show the key.
type WebhookCert struct {
	// CA is the CA certificate: the webhook configuration's caBundle.
	CA []byte
	// Cert is the serving certificate, for the Service's DNS names.
	Cert []byte
	// Key is the serving certificate's private key (PKCS #8).
	Key []byte
}

func (c WebhookCert) String() string {
	return fmt.Sprintf("WebhookCert{CA: %d bytes, Cert: %d bytes, Key: redacted}", len(c.CA), len(c.Cert))
}

func (c WebhookCert) GoString() string { return c.String() }

// webhookCertPlaceholder stands for the generated PEM in plan and manifests/.
const webhookCertPlaceholder = "placeholder: sriov-lane up generates this"

func placeholderWebhookCert() *WebhookCert {
	p := []byte(webhookCertPlaceholder)
	return &WebhookCert{CA: p, Cert: p, Key: p}
}

// InjectorServiceDNSNames are the names the API server may use for the
// injector's Service; the installer's certificate carries the same three
// (k8snetworkplumbingwg/network-resources-injector
// pkg/installer/installer.go@v1.9.0 generateCSR), first the one the API
// server dials, <service>.<namespace>.svc, also the installer's CN.
func InjectorServiceDNSNames() []string {
	return []string{InjectorService + "." + InjectorNamespace + ".svc", InjectorService, InjectorService + "." + InjectorNamespace}
}

// WithWebhookCerts returns o with a fresh certificate for every enabled
// webhook that has none: up calls it before Components, plan does not (and
// so shows placeholders, and stays deterministic).
func WithWebhookCerts(o Options) (Options, error) {
	if o.NetworkResourcesInjector.Enabled && o.NetworkResourcesInjector.Cert == nil {
		c, err := NewWebhookCert(InjectorServiceDNSNames(), time.Now())
		if err != nil {
			return o, fmt.Errorf("network-resources-injector certificate: %w", err)
		}
		o.NetworkResourcesInjector.Cert = c
	}
	return o, nil
}

// NewWebhookCert makes a CA and a serving certificate for dnsNames (the
// first is also the subject's CN), both ECDSA P-256, valid
// WebhookCertValidity from now. The CA's key signs once and is dropped.
func NewWebhookCert(dnsNames []string, now time.Time) (*WebhookCert, error) {
	if len(dnsNames) == 0 {
		return nil, fmt.Errorf("no DNS names")
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(WebhookCertValidity)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caSerial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "sriov-lane webhook CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &WebhookCert{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// serialNumber is a random positive 128-bit serial (RFC 5280 allows up to
// 20 octets).
func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
