// Package csr holds the controller-manager's CertificateSigningRequest controllers,
// as upstream's: the approver (csrapproving) approves kubelets' client certificates
// through SubjectAccessReviews and, in mizzen, kubelets' serving certificates for
// their node's own names and addresses; the signer (csrsigning) issues approved
// requests of the kubernetes.io signers with the cluster CA; the cleaner (csrcleaner)
// deletes old requests.
package csr

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// Upstream's signers this package knows.
const (
	SignerKubeletClient  = certificatesv1.KubeAPIServerClientKubeletSignerName // kubernetes.io/kube-apiserver-client-kubelet
	SignerKubeletServing = certificatesv1.KubeletServingSignerName             // kubernetes.io/kubelet-serving
	SignerClient         = certificatesv1.KubeAPIServerClientSignerName        // kubernetes.io/kube-apiserver-client

	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// parseRequest reads a CSR's PKCS#10 request.
func parseRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// condition reports whether the CSR has a condition of type t.
func condition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	return condition(csr, certificatesv1.CertificateApproved) || condition(csr, certificatesv1.CertificateDenied)
}

// usagesWithin checks that usages hold every one of required and nothing outside allowed.
func usagesWithin(usages []certificatesv1.KeyUsage, allowed []certificatesv1.KeyUsage, required ...certificatesv1.KeyUsage) error {
	for _, r := range required {
		if !slices.Contains(usages, r) {
			return fmt.Errorf("usages must include %q", r)
		}
	}
	for _, u := range usages {
		if !slices.Contains(allowed, u) {
			return fmt.Errorf("usage %q is not allowed", u)
		}
	}
	return nil
}

// nodeSubject checks a kubelet certificate's subject: CN system:node:NAME, O
// system:nodes alone; it returns NAME.
func nodeSubject(req *x509.CertificateRequest) (string, error) {
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return "", fmt.Errorf("subject organization is not %s", nodesGroup)
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix)
	if !ok || name == "" {
		return "", fmt.Errorf("subject common name does not begin with %s", nodeUserPrefix)
	}
	return name, nil
}

var (
	// Upstream's kubelet client usages: client auth, with digital signature and key
	// encipherment allowed.
	kubeletClientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	// and kubelet serving ones.
	kubeletServingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
)

// validateKubeletClient is what the kube-apiserver-client-kubelet signer requires
// (and the approver checks first): a node's subject, client usages, no SANs.
func validateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if _, err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("subjectAltNames are not allowed")
	}
	return usagesWithin(usages, kubeletClientUsages, certificatesv1.UsageClientAuth)
}

// validateKubeletServing is what the kubelet-serving signer requires: a node's
// subject, server usages, at least one DNS name or IP and no emails or URIs.
func validateKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if _, err := nodeSubject(req); err != nil {
		return err
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return errors.New("DNS or IP subjectAltName is required")
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("email and URI subjectAltNames are not allowed")
	}
	return usagesWithin(usages, kubeletServingUsages, certificatesv1.UsageServerAuth)
}

// validateClient is what the kube-apiserver-client signer requires: client auth,
// no server auth.
func validateClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	return usagesWithin(usages, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}, certificatesv1.UsageClientAuth)
}
