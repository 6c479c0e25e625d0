package volume

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// podCertKey names one podCertificate source of one pod's volume.
type podCertKey struct {
	pod    types.UID
	volume string
	source int
}

// podCert is what the kubelet holds for one podCertificate source: the key of the
// request in flight (if any) and the last issued credentials.
type podCert struct {
	// pending is the request waiting for its signer, with the key it was made for.
	pendingNamespace, pendingName string
	pendingKey                    crypto.Signer
	// issued credentials, kept while a refresh is pending.
	keyPEM, chainPEM []byte
	refreshAt        time.Time
}

// podCertCache holds the pod certificates of every pod on the node.
type podCertCache struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	m     map[podCertKey]*podCert
}

func newPodCertCache(c clock.PassiveClock) *podCertCache {
	return &podCertCache{clock: c, m: map[podCertKey]*podCert{}}
}

func (c *podCertCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.pod == uid {
			delete(c.m, k)
		}
	}
}

// nextRefresh is the earliest moment one of the pod's issued certificates is due a
// refresh (its beginRefreshAt), or now for one whose refresh request is pending (the
// caller retries those); ok is false if there is none. Certificates not issued yet
// fail their mount, which the mount retry takes care of.
func (c *podCertCache) nextRefresh(uid types.UID) (at time.Time, ok bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		if k.pod != uid || st.keyPEM == nil {
			continue
		}
		t := st.refreshAt
		if st.pendingName != "" {
			t = now
		}
		at, ok = earliest(at, ok, t), true
	}
	return at, ok
}

// podCertificatePayload is the files of a podCertificate projection. The first call
// makes a private key and files a PodCertificateRequest for it; the volume is not
// ready (an error, retried) until the signer has issued the certificate. From its
// beginRefreshAt on, a new key and request replace it, the old credentials staying
// in place until the new ones are issued.
func (m *Manager) podCertificatePayload(ctx context.Context, pod *v1.Pod, key podCertKey, src *v1.PodCertificateProjection, defMode *int32) (payload, error) {
	c := m.podCerts
	c.mu.Lock()
	st := c.m[key]
	if st == nil {
		st = &podCert{}
		c.m[key] = st
	}
	c.mu.Unlock()
	// One volume's set-up runs at a time per pod, so st is not shared further.
	now := c.clock.Now()
	if st.keyPEM == nil || !now.Before(st.refreshAt) {
		if err := m.advancePodCertificate(ctx, pod, st, src); err != nil && st.keyPEM == nil {
			return nil, err
		}
	}
	if st.keyPEM == nil {
		return nil, fmt.Errorf("PodCertificateRequest %s/%s for signer %q has not been issued yet", st.pendingNamespace, st.pendingName, src.SignerName)
	}
	p := payload{}
	mode := fileMode(nil, defMode)
	if src.CredentialBundlePath != "" {
		p[src.CredentialBundlePath] = file{data: append(append([]byte(nil), st.keyPEM...), st.chainPEM...), mode: mode}
	}
	if src.KeyPath != "" {
		p[src.KeyPath] = file{data: st.keyPEM, mode: mode}
	}
	if src.CertificateChainPath != "" {
		p[src.CertificateChainPath] = file{data: st.chainPEM, mode: mode}
	}
	return p, nil
}

// advancePodCertificate files a request when none is pending, or looks at the
// pending one and takes its certificate once issued. A denied or failed request is
// dropped, so the next try files a new one.
func (m *Manager) advancePodCertificate(ctx context.Context, pod *v1.Pod, st *podCert, src *v1.PodCertificateProjection) error {
	if st.pendingName == "" {
		signer, err := newPodCertificateKey(src.KeyType)
		if err != nil {
			return err
		}
		stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, signer)
		if err != nil {
			return fmt.Errorf("while making the PKCS#10 request: %w", err)
		}
		req := &certificatesv1.PodCertificateRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-" + pod.Name + "-"},
			Spec: certificatesv1.PodCertificateRequestSpec{
				SignerName:                src.SignerName,
				PodName:                   pod.Name,
				PodUID:                    pod.UID,
				MaxExpirationSeconds:      src.MaxExpirationSeconds,
				StubPKCS10Request:         stub,
				UnverifiedUserAnnotations: src.UserAnnotations,
			},
		}
		created, err := m.opts.Sources.CreatePodCertificateRequest(ctx, pod, req)
		if err != nil {
			return fmt.Errorf("while creating a PodCertificateRequest: %w", err)
		}
		st.pendingNamespace, st.pendingName, st.pendingKey = created.Namespace, created.Name, signer
		return fmt.Errorf("PodCertificateRequest %s/%s for signer %q has not been issued yet", created.Namespace, created.Name, src.SignerName)
	}
	pcr, err := m.opts.Sources.PodCertificateRequest(ctx, st.pendingNamespace, st.pendingName)
	if err != nil {
		return fmt.Errorf("while reading PodCertificateRequest %s/%s: %w", st.pendingNamespace, st.pendingName, err)
	}
	for _, t := range []string{certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed} {
		if cond := meta.FindStatusCondition(pcr.Status.Conditions, t); cond != nil && cond.Status == metav1.ConditionTrue {
			st.pendingNamespace, st.pendingName, st.pendingKey = "", "", nil
			return fmt.Errorf("PodCertificateRequest %s/%s was %s: %s: %s", pcr.Namespace, pcr.Name, t, cond.Reason, cond.Message)
		}
	}
	if !meta.IsStatusConditionTrue(pcr.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeIssued) || pcr.Status.CertificateChain == "" {
		return fmt.Errorf("PodCertificateRequest %s/%s for signer %q has not been issued yet", pcr.Namespace, pcr.Name, src.SignerName)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(st.pendingKey)
	if err != nil {
		return err
	}
	st.keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	// The chain without what lay between its blocks, as the API asks of the kubelet.
	st.chainPEM = nil
	for _, der := range certificateBlocks(pcr.Status.CertificateChain) {
		st.chainPEM = append(st.chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	switch {
	case pcr.Status.BeginRefreshAt != nil:
		st.refreshAt = pcr.Status.BeginRefreshAt.Time
	case pcr.Status.NotAfter != nil:
		st.refreshAt = pcr.Status.NotAfter.Time
	default:
		st.refreshAt = m.podCerts.clock.Now().Add(time.Hour)
	}
	st.pendingNamespace, st.pendingName, st.pendingKey = "", "", nil
	return nil
}

// newPodCertificateKey makes a private key of one of the pod certificate key types.
func newPodCertificateKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case "RSA3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unsupported key type %q", keyType)
}
