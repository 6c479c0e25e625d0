// Package certificates holds upstream's three CertificateSigningRequest admission
// plugins: CertificateApproval (approving or denying a request needs the `approve`
// verb on the request's signer), CertificateSigning (writing status.certificate needs
// `sign` on it) and CertificateSubjectRestriction (no kube-apiserver-client request
// may name the group system:masters).
package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"reflect"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// Upstream's plugin names.
const (
	ApprovalPluginName           = "CertificateApproval"
	SigningPluginName            = "CertificateSigning"
	SubjectRestrictionPluginName = "CertificateSubjectRestriction"
)

func isCSR(a *admission.Attributes) bool {
	return a.Resource.Group == certificatesv1.GroupName && a.Resource.Resource == "certificatesigningrequests"
}

// authorizedForSigner asks the authorizer whether user may do verb on the signer
// signerName, or on every signer of its domain ("example.com/*"), as upstream does.
// Without an authorizer every user may.
func authorizedForSigner(ctx context.Context, az authz.Authorizer, user registry.User, verb, signerName string) bool {
	if az == nil {
		return true
	}
	attrs := authz.Attributes{User: user, Verb: verb, ResourceRequest: true, Group: certificatesv1.GroupName,
		Resource: "signers", Name: signerName}
	if ok, _ := az.Authorize(ctx, attrs); ok {
		return true
	}
	if i := strings.Index(signerName, "/"); i > 0 {
		attrs.Name = signerName[:i] + "/*"
		ok, _ := az.Authorize(ctx, attrs)
		return ok
	}
	return false
}

// signerCheck is what CertificateApproval and CertificateSigning share: a write of one
// subresource of a CSR needs a verb on the CSR's signer.
type signerCheck struct {
	admission.Ops
	authz       authz.Authorizer
	subresource string
	verb        string
	// changed, when set, compares the stored CSR with the written one: only a write
	// that changes what it guards needs the verb, checked on the stored signer.
	changed func(old, csr *certificatesv1.CertificateSigningRequest) bool
}

var _ admission.Validator = (*signerCheck)(nil)

// Validate checks writes of the subresource.
func (p *signerCheck) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Internal || !isCSR(a) || a.Subresource != p.subresource {
		return nil
	}
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return admission.Forbiddenf(a, "expected type CertificateSigningRequest, got: %T", a.Object)
	}
	signer := csr.Spec.SignerName
	if p.changed != nil {
		old, ok := a.OldObject.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return admission.Forbiddenf(a, "expected type CertificateSigningRequest, got: %T", a.OldObject)
		}
		if !p.changed(old, csr) {
			return nil
		}
		signer = old.Spec.SignerName
	}
	if !authorizedForSigner(ctx, p.authz, a.User, p.verb, signer) {
		return admission.Forbiddenf(a, "user not permitted to %s requests with signerName %q", p.verb, signer)
	}
	return nil
}

// Approval is CertificateApproval: approving or denying a CSR (the approval
// subresource) needs "approve" on its signer.
type Approval struct{ signerCheck }

// NewApproval returns the plugin.
func NewApproval(az authz.Authorizer) *Approval {
	return &Approval{signerCheck{Ops: admission.Ops{admission.Update}, authz: az, subresource: "approval", verb: "approve"}}
}

// Signing is CertificateSigning: setting or changing a CSR's certificate (the status
// subresource) needs "sign" on its signer.
type Signing struct{ signerCheck }

// NewSigning returns the plugin.
func NewSigning(az authz.Authorizer) *Signing {
	return &Signing{signerCheck{Ops: admission.Ops{admission.Update}, authz: az, subresource: "status", verb: "sign",
		changed: func(old, csr *certificatesv1.CertificateSigningRequest) bool {
			return !reflect.DeepEqual(old.Status.Certificate, csr.Status.Certificate)
		}}}
}

// SubjectRestriction is CertificateSubjectRestriction.
type SubjectRestriction struct{ admission.Ops }

// NewSubjectRestriction returns the plugin.
func NewSubjectRestriction() *SubjectRestriction {
	return &SubjectRestriction{Ops: admission.Ops{admission.Create}}
}

var _ admission.Validator = (*SubjectRestriction)(nil)

// Validate refuses kube-apiserver-client requests for the group system:masters.
func (p *SubjectRestriction) Validate(_ context.Context, a *admission.Attributes) error {
	if !isCSR(a) || a.Subresource != "" {
		return nil
	}
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return admission.Forbiddenf(a, "expected type CertificateSigningRequest, got: %T", a.Object)
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return admission.Forbiddenf(a, "failed to parse CSR: PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return admission.Forbiddenf(a, "failed to parse CSR: %v", err)
	}
	for _, group := range req.Subject.Organization {
		if group == "system:masters" {
			return admission.NewForbidden(a, fmt.Errorf("use of %s signer with system:masters group is not allowed", csr.Spec.SignerName))
		}
	}
	return nil
}
