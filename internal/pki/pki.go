// Package pki creates and keeps the cluster's certificates: the cluster CA (made on
// first start and kept in the data directory), the apiserver's serving certificate, and
// client certificates such as the admin's, and writes kubeconfig files that use them.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// CA is a certificate authority that can sign certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// LoadCA reads name.crt and name.key from dir; a missing file is an error
// (fs.ErrNotExist).
func LoadCA(dir, name string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading CA %s: %w", certPath, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: pair.PrivateKey.(crypto.Signer), CertPEM: certPEM}, nil
}

// LoadOrCreateCA reads name.crt and name.key from dir, creating them (10 years) when
// the certificate is absent.
func LoadOrCreateCA(dir, name, commonName string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := os.Stat(certPath); !errors.Is(err, os.ErrNotExist) {
		return LoadCA(dir, name) // there (or unreadable): never replaced
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", commonName, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := encodeCert(der)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// Issued is a certificate and key signed by a CA.
type Issued struct {
	CertPEM, KeyPEM []byte
}

// TLS returns the pair as a tls.Certificate.
func (i *Issued) TLS() (tls.Certificate, error) { return tls.X509KeyPair(i.CertPEM, i.KeyPEM) }

// Write writes the key (readable by its owner only), then the certificate.
func (i *Issued) Write(certFile, keyFile string) error {
	if err := os.WriteFile(keyFile, i.KeyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, i.CertPEM, 0o644)
}

func (ca *CA) issue(tmpl *x509.Certificate) (*Issued, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.AddDate(1, 0, 0)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// IssueServing signs a server certificate for the given DNS names and IPs.
func (ca *CA) IssueServing(commonName string, dnsNames []string, ips []net.IP) (*Issued, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// IssuePeer signs a certificate valid both for serving and as a client, for the given
// DNS names and IPs: what an etcd member presents to the other members, in both
// directions of their mutual TLS.
func (ca *CA) IssuePeer(commonName string, dnsNames []string, ips []net.IP) (*Issued, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// IssueClient signs a client certificate: the user is the common name and the groups
// are the organizations, as Kubernetes reads them.
func (ca *CA) IssueClient(user string, groups []string) (*Issued, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// LoadOrIssueClient keeps a client certificate in dir/name.{crt,key}, issuing it when
// absent, and issuing it anew when the kept one is no longer the one asked for: signed
// by another CA, not for client auth, for another user or groups, or expiring within
// RenewBefore (k3s's rule, so a server restarted in time never serves stale credentials).
func (ca *CA) LoadOrIssueClient(dir, name, user string, groups []string) (*Issued, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 == nil && err2 == nil {
		if kept := (&Issued{CertPEM: certPEM, KeyPEM: keyPEM}); ca.isClientFor(kept, user, groups, time.Now()) {
			return kept, nil
		}
	}
	issued, err := ca.IssueClient(user, groups)
	if err != nil {
		return nil, err
	}
	if err := issued.Write(certPath, keyPath); err != nil {
		return nil, err
	}
	return issued, nil
}

// RenewBefore is how long before expiry a kept certificate is issued anew.
const RenewBefore = 90 * 24 * time.Hour

// isClientFor reports whether issued is a valid key pair and a client certificate of
// this CA for user in exactly groups, valid for longer than RenewBefore after now.
func (ca *CA) isClientFor(issued *Issued, user string, groups []string, now time.Time) bool {
	pair, err := issued.TLS()
	if err != nil || len(pair.Certificate) == 0 {
		return false
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	if cert.CheckSignatureFrom(ca.Cert) != nil || now.Add(RenewBefore).After(cert.NotAfter) {
		return false
	}
	if cert.Subject.CommonName != user || !slices.Equal(cert.Subject.Organization, groups) && len(cert.Subject.Organization)+len(groups) > 0 {
		return false
	}
	return slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}

// WriteKubeconfig writes a kubeconfig that reaches server with the CA and a client
// certificate.
func WriteKubeconfig(path, server string, caPEM []byte, client *Issued, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mizzen"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts["mizzen"] = &clientcmdapi.Context{Cluster: "mizzen", AuthInfo: user}
	cfg.CurrentContext = "mizzen"
	return clientcmd.WriteToFile(*cfg, path)
}
