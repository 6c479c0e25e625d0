package csr

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// CleanerName names the cleaner in its logs.
const CleanerName = "csrcleaner"

// Upstream's retention: decided requests an hour after the decision, pending ones a
// day after they were made, issued ones once their certificate has expired.
const (
	decidedRetention = time.Hour
	pendingRetention = 24 * time.Hour
	cleanerInterval  = time.Hour
)

// Cleaner deletes old CSRs, as upstream's csrcleaner, looking every hour.
type Cleaner struct {
	client kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	now    func() time.Time
}

// NewCleaner is a cleaner over the CSR informer.
func NewCleaner(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer) *Cleaner {
	return &Cleaner{client: client, csrs: csrs.Lister(), synced: csrs.Informer().HasSynced, now: time.Now}
}

// Run cleans until ctx ends.
func (c *Cleaner) Run(ctx context.Context) {
	if !cache.WaitForNamedCacheSync(CleanerName, ctx.Done(), c.synced) {
		return
	}
	t := time.NewTicker(cleanerInterval)
	defer t.Stop()
	for {
		c.clean(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cleaner) clean(ctx context.Context) {
	list, err := c.csrs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, csr := range list {
		if !c.expired(csr) {
			continue
		}
		uid := csr.UID
		err := c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			slog.WarnContext(ctx, "deleting an old CSR", "controller", CleanerName, "csr", csr.Name, "err", err)
		}
	}
}

// expired tells whether a CSR is past upstream's retention.
func (c *Cleaner) expired(csr *certificatesv1.CertificateSigningRequest) bool {
	now := c.now()
	if len(csr.Status.Certificate) > 0 {
		if block, _ := pem.Decode(csr.Status.Certificate); block != nil {
			if cert, err := x509.ParseCertificate(block.Bytes); err == nil && now.After(cert.NotAfter) {
				return true
			}
		}
	}
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			at := cond.LastUpdateTime.Time
			if at.IsZero() {
				at = csr.CreationTimestamp.Time
			}
			if now.Sub(at) > decidedRetention {
				return true
			}
		}
	}
	return !decided(csr) && !condition(csr, certificatesv1.CertificateFailed) && now.Sub(csr.CreationTimestamp.Time) > pendingRetention
}
