package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough for any test run or quickstart session.
const certValidity = 7 * 24 * time.Hour

// pki is one cluster's certificate authority and the files signed by it.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI creates a fresh CA for one cluster, so clusters never trust each other's credentials.
func newPKI(dir, clusterName string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: clusterName + "-ca"}, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA: %w", err)
	}
	p := &pki{dir: dir, caCert: ca, caKey: key}
	if err := writeCertKey(p.path("ca.crt"), p.path("ca.key"), ca, key); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs a serving or client certificate and writes NAME.crt and NAME.key.
func (p *pki) issue(name, commonName string, orgs []string, server bool, ips []net.IP, dnsNames []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("signing %s certificate: %w", name, err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	return writeCertKey(p.path(name+".crt"), p.path(name+".key"), crt, key)
}

// serviceAccountKey writes the RSA key pair the apiserver signs ServiceAccount tokens with.
func (p *pki) serviceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	priv, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	// The apiserver reads the public half from the same file (--service-account-key-file).
	return os.WriteFile(p.path("sa.key"), priv, 0o600)
}

func writeCertKey(certPath, keyPath string, crt *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	certPEM, err := cert.EncodeCertificates(crt)
	if err != nil {
		return err
	}
	if err := cert.WriteCert(certPath, certPEM); err != nil {
		return err
	}
	return keyutil.WriteKey(keyPath, keyPEM)
}
