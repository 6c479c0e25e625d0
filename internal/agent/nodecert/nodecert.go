// Package nodecert is how a joining node gets and keeps its certificates through the
// CertificateSigningRequest API, as upstream's kubelet TLS bootstrap and certificate
// manager do: the private key is made and kept on the node, a CSR carries only its
// public half, and the certificate the cluster issues is stored beside the key in one
// PEM file (upstream's kubelet-client-current.pem, kubelet-server-current.pem). A
// Manager renews a certificate at a random point between 70% and 90% of its lifetime,
// without a restart: users read the current certificate through a callback.
package nodecert

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Request files a CSR for tmpl with key, signed by signer, and waits until the
// cluster issues it; a denied or failed request is an error naming why.
func Request(ctx context.Context, client kubernetes.Interface, key crypto.Signer, tmpl *x509.CertificateRequest,
	signer string, usages []certificatesv1.KeyUsage) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("making the certificate request: %w", err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Usages: usages,
		},
	}
	created, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("filing the certificate signing request for %s: %w", tmpl.Subject.CommonName, err)
	}
	name := created.Name
	slog.InfoContext(ctx, "filed a certificate signing request", "csr", name, "signer", signer, "subject", tmpl.Subject.CommonName)
	for {
		got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("certificate signing request %s was deleted before it was issued", name)
		case err == nil:
			for _, c := range got.Status.Conditions {
				if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
					return nil, fmt.Errorf("certificate signing request %s %s: %s: %s", name, c.Type, c.Reason, c.Message)
				}
			}
			if len(got.Status.Certificate) > 0 {
				return got.Status.Certificate, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for certificate signing request %s to be approved and issued: %w", name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// NewKey makes a node's private key.
func NewKey() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// Load reads a certificate and key PEM file as Save writes it.
func Load(path string) (*tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(data, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &pair, nil
}

// Save writes the certificate chain and its key into one file readable by its owner
// only, replacing the old file at once.
func Save(path string, certPEM []byte, key crypto.Signer) (*tls.Certificate, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	data := append(bytes.TrimSpace(certPEM), '\n')
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return Load(path)
}

// Manager keeps one certificate current.
type Manager struct {
	// Path is the PEM file of the certificate and its key.
	Path string
	// Template is the request to make; it may wait for what it needs (a node's
	// addresses) until ctx ends.
	Template func(ctx context.Context) (*x509.CertificateRequest, error)
	Signer   string
	Usages   []certificatesv1.KeyUsage
	// Client files the CSRs; it is asked anew for each, so it may change once the
	// node has credentials of its own.
	Client func() (kubernetes.Interface, error)
	// OnRotate, when set, is called after a new certificate is in place.
	OnRotate func()

	current atomic.Pointer[tls.Certificate]
}

// Current is the certificate in use, nil before the first one.
func (m *Manager) Current() *tls.Certificate { return m.current.Load() }

// GetClientCertificate serves as tls.Config.GetClientCertificate.
func (m *Manager) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := m.Current(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// GetCertificate serves as tls.Config.GetCertificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.Current(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet: the certificate signing request is not issued")
}

// LoadExisting takes the stored certificate if it is still valid, and tells whether
// it did.
func (m *Manager) LoadExisting() bool {
	c, err := Load(m.Path)
	if err != nil || time.Now().After(c.Leaf.NotAfter) {
		return false
	}
	m.current.Store(c)
	return true
}

// Ensure makes sure there is a valid certificate, the stored one or a new one.
func (m *Manager) Ensure(ctx context.Context) error {
	if m.LoadExisting() {
		return nil
	}
	return m.renew(ctx)
}

func (m *Manager) renew(ctx context.Context) error {
	tmpl, err := m.Template(ctx)
	if err != nil {
		return err
	}
	client, err := m.Client()
	if err != nil {
		return err
	}
	key, err := NewKey()
	if err != nil {
		return err
	}
	certPEM, err := Request(ctx, client, key, tmpl, m.Signer, m.Usages)
	if err != nil {
		return err
	}
	c, err := Save(m.Path, certPEM, key)
	if err != nil {
		return err
	}
	m.current.Store(c)
	slog.InfoContext(ctx, "certificate issued", "file", m.Path, "subject", c.Leaf.Subject.CommonName, "expires", c.Leaf.NotAfter)
	if m.OnRotate != nil {
		m.OnRotate()
	}
	return nil
}

// Run gets a certificate when there is none, and renews it at a jittered 70–90% of
// its lifetime, until ctx ends; a failed attempt is retried with backoff.
func (m *Manager) Run(ctx context.Context) {
	backoff := time.Second
	for {
		wait := time.Duration(0)
		if c := m.Current(); c != nil {
			wait = time.Until(RotationDeadline(c.Leaf))
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if err := m.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			slog.WarnContext(ctx, "renewing a certificate failed; will retry", "file", m.Path, "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Minute)
			continue
		}
		backoff = time.Second
	}
}

// RotationDeadline is when a certificate is renewed: a random point between 70% and
// 90% of its lifetime, as upstream's certificate manager picks it.
func RotationDeadline(c *x509.Certificate) time.Time {
	total := c.NotAfter.Sub(c.NotBefore)
	n, _ := rand.Int(rand.Reader, big.NewInt(1000))
	// In ten-thousandths, in integers: 0.7 in floating point would land a hair
	// before 70%.
	return c.NotBefore.Add(total / 10000 * time.Duration(7000+2*n.Int64()))
}
