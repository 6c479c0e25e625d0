package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Bounds of a PodCertificateRequest's spec.maxExpirationSeconds, as upstream's: at
// least an hour, at most 91 days, and at most a day for kubernetes.io signers.
const (
	DefaultPCRMaxExpirationSeconds    = 86400
	MinPCRMaxExpirationSeconds        = 3600
	MaxPCRMaxExpirationSeconds        = 91 * 86400
	KubernetesPCRMaxExpirationSeconds = 86400
)

// PodCertificateKeyTypes are the key types a pod certificate may have.
var PodCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// podCertificateRequests is certificates.k8s.io/v1 podcertificaterequests: a kubelet's
// request, on behalf of one pod, for a certificate of a signer's, which the signer
// answers through the status (Issued with the chain, or Denied, or Failed).
func podCertificateRequests() *registry.Resource {
	return &registry.Resource{
		GroupVersion: certificatesv1.SchemeGroupVersion,
		Resource:     "podcertificaterequests",
		Kind:         "PodCertificateRequest",
		SingularName: "podcertificaterequest",
		Namespaced:   true,
		HasStatus:    true,
		New:          func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		NewList:      func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		Strategy:     pcrStrategy{},
		Fields: func(obj runtime.Object) fields.Set {
			pcr := obj.(*certificatesv1.PodCertificateRequest)
			return fields.Set{
				"spec.signerName": pcr.Spec.SignerName,
				"spec.podName":    pcr.Spec.PodName,
				"spec.nodeName":   string(pcr.Spec.NodeName),
			}
		},
	}
}

type pcrStrategy struct{ registry.BaseStrategy }

func (pcrStrategy) Default(obj runtime.Object) {
	pcr := obj.(*certificatesv1.PodCertificateRequest)
	if pcr.Spec.MaxExpirationSeconds == nil {
		v := int32(DefaultPCRMaxExpirationSeconds)
		pcr.Spec.MaxExpirationSeconds = &v
	}
}

// PrepareForCreate starts a request without status: only the signer answers it.
func (pcrStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*certificatesv1.PodCertificateRequest).Status = certificatesv1.PodCertificateRequestStatus{}
}

func (pcrStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	pcr := obj.(*certificatesv1.PodCertificateRequest)
	return append(validatePCRSpec(&pcr.Spec), validatePCRStatus(pcr, nil)...)
}

// ValidateUpdate: the request is fixed once made; the status may be answered once.
func (pcrStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	pcr, oldPCR := obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest)
	allErrs := apimachineryvalidation.ValidateImmutableField(pcr.Spec, oldPCR.Spec, field.NewPath("spec"))
	return append(allErrs, validatePCRStatus(pcr, oldPCR)...)
}

func validatePCRSpec(spec *certificatesv1.PodCertificateRequestSpec) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := validateSignerName(spec.SignerName, specPath.Child("signerName"))
	for _, f := range []struct {
		name, value string
	}{{"podName", spec.PodName}, {"serviceAccountName", spec.ServiceAccountName}, {"nodeName", string(spec.NodeName)}} {
		for _, msg := range validation.IsDNS1123Subdomain(f.value) {
			allErrs = append(allErrs, field.Invalid(specPath.Child(f.name), f.value, msg))
		}
	}
	for _, f := range []struct {
		name, value string
	}{{"podUID", string(spec.PodUID)}, {"serviceAccountUID", string(spec.ServiceAccountUID)}, {"nodeUID", string(spec.NodeUID)}} {
		switch {
		case f.value == "":
			allErrs = append(allErrs, field.Invalid(specPath.Child(f.name), f.value, "must not be empty"))
		case len(f.value) > 128:
			allErrs = append(allErrs, field.TooLong(specPath.Child(f.name), f.value, 128))
		}
	}
	expPath := specPath.Child("maxExpirationSeconds")
	if e := spec.MaxExpirationSeconds; e == nil {
		allErrs = append(allErrs, field.Required(expPath, "must be set"))
	} else {
		maxExp := int32(MaxPCRMaxExpirationSeconds)
		if strings.HasPrefix(spec.SignerName, "kubernetes.io/") {
			maxExp = KubernetesPCRMaxExpirationSeconds
		}
		if *e < MinPCRMaxExpirationSeconds || *e > maxExp {
			allErrs = append(allErrs, field.Invalid(expPath, *e, fmt.Sprintf("must be in the range [%d, %d]", MinPCRMaxExpirationSeconds, maxExp)))
		}
	}
	reqPath := specPath.Child("stubPKCS10Request")
	if len(spec.StubPKCS10Request) == 0 {
		allErrs = append(allErrs, field.Required(reqPath, "must be set"))
	} else if req, err := x509.ParseCertificateRequest(spec.StubPKCS10Request); err != nil {
		allErrs = append(allErrs, field.Invalid(reqPath, "<value omitted>", fmt.Sprintf("must be a DER-encoded PKCS#10 request: %v", err)))
	} else if err := req.CheckSignature(); err != nil {
		allErrs = append(allErrs, field.Invalid(reqPath, "<value omitted>", fmt.Sprintf("signature does not verify: %v", err)))
	} else if kt := KeyType(req.PublicKey); kt == "" {
		allErrs = append(allErrs, field.Invalid(reqPath, "<value omitted>", fmt.Sprintf("the subject public key must be one of %s", strings.Join(PodCertificateKeyTypes, ", "))))
	}
	annPath := specPath.Child("unverifiedUserAnnotations")
	for k := range spec.UnverifiedUserAnnotations {
		if !strings.Contains(k, "/") {
			allErrs = append(allErrs, field.Invalid(annPath.Key(k), k, "must be a domain-prefixed key (e.g. example.com/key)"))
		}
	}
	return append(allErrs, apimachineryvalidation.ValidateAnnotations(spec.UnverifiedUserAnnotations, annPath)...)
}

// KeyType names a public key as pod certificates do ("ECDSAP256", ...), or "" for
// one they do not allow.
func KeyType(pub any) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		switch k.N.BitLen() {
		case 3072:
			return "RSA3072"
		case 4096:
			return "RSA4096"
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ECDSAP256"
		case elliptic.P384():
			return "ECDSAP384"
		case elliptic.P521():
			return "ECDSAP521"
		}
	case ed25519.PublicKey:
		return "ED25519"
	}
	return ""
}

// validatePCRStatus checks the signer's answer: at most one of Issued, Denied and
// Failed, each True; an issued request carries a parseable chain and its validity
// window; and once answered, the answer stays.
func validatePCRStatus(pcr, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	statusPath := field.NewPath("status")
	condPath := statusPath.Child("conditions")
	allErrs := metav1validation.ValidateConditions(pcr.Status.Conditions, condPath)
	terminal := ""
	for i, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			if terminal != "" {
				allErrs = append(allErrs, field.Invalid(condPath.Index(i).Child("type"), c.Type, fmt.Sprintf("only one of Issued, Denied and Failed may be set (already %s)", terminal)))
			}
			terminal = c.Type
			if c.Status != metav1.ConditionTrue {
				allErrs = append(allErrs, field.NotSupported(condPath.Index(i).Child("status"), c.Status, []string{string(metav1.ConditionTrue)}))
			}
		}
	}
	s := pcr.Status
	if terminal == certificatesv1.PodCertificateRequestConditionTypeIssued {
		if s.CertificateChain == "" {
			allErrs = append(allErrs, field.Required(statusPath.Child("certificateChain"), "must be set when the request is Issued"))
		} else if err := checkCertificate([]byte(s.CertificateChain)); err != nil {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("certificateChain"), "<value omitted>", err.Error()))
		}
		for _, t := range []struct {
			name string
			v    *metav1.Time
		}{{"notBefore", s.NotBefore}, {"notAfter", s.NotAfter}, {"beginRefreshAt", s.BeginRefreshAt}} {
			if t.v == nil {
				allErrs = append(allErrs, field.Required(statusPath.Child(t.name), "must be set when the request is Issued"))
			}
		}
		if s.NotBefore != nil && s.NotAfter != nil && pcr.Spec.MaxExpirationSeconds != nil {
			life := s.NotAfter.Sub(s.NotBefore.Time)
			if life < MinPCRMaxExpirationSeconds*time.Second {
				allErrs = append(allErrs, field.Invalid(statusPath.Child("notAfter"), s.NotAfter, "the certificate must be valid for at least 3600 seconds"))
			}
			if life > time.Duration(*pcr.Spec.MaxExpirationSeconds)*time.Second {
				allErrs = append(allErrs, field.Invalid(statusPath.Child("notAfter"), s.NotAfter, "the certificate may not outlive spec.maxExpirationSeconds"))
			}
		}
	} else if s.CertificateChain != "" {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("certificateChain"), "<value omitted>", "may only be set when the request is Issued"))
	}
	if old != nil && pcrAnswered(old) && !apiequality.Semantic.DeepEqual(pcr.Status, old.Status) {
		allErrs = append(allErrs, field.Forbidden(statusPath, "may not be changed once the request is Issued, Denied or Failed"))
	}
	return allErrs
}

func pcrAnswered(pcr *certificatesv1.PodCertificateRequest) bool {
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			return true
		}
	}
	return false
}
