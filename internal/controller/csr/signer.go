package csr

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// SignerName names the signer in its logs.
const SignerName = "csrsigning"

// DefaultSigningDuration is upstream's --cluster-signing-duration: a year.
const DefaultSigningDuration = 365 * 24 * time.Hour

// backdate is how far before now certificates start, for clocks a little behind.
const backdate = 5 * time.Minute

// CA is the key pair that signs, as --cluster-signing-cert-file and -key-file name it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA reads the signing CA's PEM files.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("the cluster signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the cluster signing key cannot sign")
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Signer issues approved CSRs of the kubelet client, kubelet serving and
// kube-apiserver-client signers; requests for other signers are another signer's.
type Signer struct {
	client   kubernetes.Interface
	csrs     certlisters.CertificateSigningRequestLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	ca       *CA
	duration time.Duration
	now      func() time.Time
}

// NewSigner registers the signer's handlers; duration is the longest certificate
// it issues (DefaultSigningDuration when zero).
func NewSigner(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, ca *CA, duration time.Duration) *Signer {
	if duration <= 0 {
		duration = DefaultSigningDuration
	}
	s := &Signer{client: client, csrs: csrs.Lister(), synced: csrs.Informer().HasSynced,
		queue: util.NewQueue("certificate_signer"), ca: ca, duration: duration, now: time.Now}
	csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(s.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(s.queue, obj) },
	})
	return s
}

// Run signs until ctx ends.
func (s *Signer) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, SignerName, s.queue, workers, s.sync, s.synced)
}

func (s *Signer) sync(ctx context.Context, name string) error {
	csr, err := s.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !condition(csr, certificatesv1.CertificateApproved) || condition(csr, certificatesv1.CertificateDenied) ||
		condition(csr, certificatesv1.CertificateFailed) || len(csr.Status.Certificate) > 0 {
		return nil
	}
	var validate func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error
	switch csr.Spec.SignerName {
	case SignerKubeletClient:
		validate = validateKubeletClient
	case SignerKubeletServing:
		validate = validateKubeletServing
	case SignerClient:
		validate = validateClient
	default:
		return nil
	}
	req, err := parseRequest(csr)
	if err == nil {
		err = validate(req, csr.Spec.Usages)
	}
	csr = csr.DeepCopy()
	if err != nil {
		// Upstream's signer marks what it will never sign as Failed, so the requester
		// does not wait forever.
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
			Reason: "SignerValidationFailure", Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
	} else {
		cert, err := s.sign(req, csr.Spec.Usages, csr.Spec.ExpirationSeconds)
		if err != nil {
			return err
		}
		csr.Status.Certificate = cert
	}
	_, err = s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// sign issues the certificate the request asks for, for the signer's duration or
// the shorter one requested, never beyond the CA's own expiry.
func (s *Signer) sign(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, expirationSeconds *int32) ([]byte, error) {
	ttl := s.duration
	if expirationSeconds != nil {
		if asked := time.Duration(*expirationSeconds) * time.Second; asked < ttl {
			ttl = max(asked, 10*time.Minute)
		}
	}
	now := s.now()
	notBefore := now.Add(-backdate)
	if notBefore.Before(s.ca.Cert.NotBefore) {
		notBefore = s.ca.Cert.NotBefore
	}
	notAfter := now.Add(ttl)
	if notAfter.After(s.ca.Cert.NotAfter) {
		notAfter = s.ca.Cert.NotAfter
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, EmailAddresses: req.EmailAddresses, URIs: req.URIs,
		NotBefore: notBefore, NotAfter: notAfter, BasicConstraintsValid: true,
	}
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		case certificatesv1.UsageClientAuth:
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		case certificatesv1.UsageServerAuth:
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca.Cert, req.PublicKey, s.ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
