// Package certificates describes the certificates.k8s.io/v1 certificatesigningrequests
// resource, with its defaulting, validation and printing as upstream Kubernetes does
// them. Who made a request (spec.username, uid, groups, extra) is never taken from the
// client: on create the fields are set from the Requestor the server puts in the
// request's context with WithRequestor, and left empty without one.
package certificates

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

const (
	// legacyUnknownSignerName is the v1beta1-era signer that v1 refuses.
	legacyUnknownSignerName = "kubernetes.io/legacy-unknown"
	// minExpirationSeconds is the shortest certificate a request may ask for.
	minExpirationSeconds = 600
)

// Resources returns the certificates.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	// upstream takes these descriptions from the v1beta1 docs
	specDoc := certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return []*registry.Resource{{
		GroupVersion: certificatesv1.SchemeGroupVersion,
		Resource:     "certificatesigningrequests",
		Kind:         "CertificateSigningRequest",
		SingularName: "certificatesigningrequest",
		ShortNames:   []string{"csr"},
		// Upstream does not restrict what requests are called; mizzen only keeps the
		// name usable as one URL path segment (and etcd key segment).
		ValidateName: func(name string, prefix bool) []string {
			if prefix {
				return path.IsValidPathSegmentPrefix(name)
			}
			return path.IsValidPathSegmentName(name)
		},
		New:             func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:         func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Strategy:        csrStrategy{},
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": obj.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
		},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				registry.AgeColumn,
				{Name: "SignerName", Type: "string", Description: specDoc["signerName"]},
				{Name: "Requestor", Type: "string", Description: specDoc["request"]},
				{Name: "RequestedDuration", Type: "string", Description: specDoc["expirationSeconds"]},
				{Name: "Condition", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
			},
			Row: printCSR,
		},
	}}
}

func printCSR(obj runtime.Object) []interface{} {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	signer := "<none>"
	if csr.Spec.SignerName != "" {
		signer = csr.Spec.SignerName
	}
	requested := "<none>"
	if csr.Spec.ExpirationSeconds != nil {
		requested = duration.HumanDuration(time.Duration(*csr.Spec.ExpirationSeconds) * time.Second)
	}
	return []interface{}{csr.Name, registry.Age(csr.CreationTimestamp), signer, csr.Spec.Username, requested, conditionSummary(csr)}
}

// conditionSummary is the CONDITION cell: Denied, Approved or Pending, then
// ",Failed" and ",Issued" as they apply.
func conditionSummary(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	if denied {
		status = "Denied"
	} else if approved {
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}

type csrStrategy struct{ registry.BaseStrategy }

// PrepareForCreate replaces what the client claimed about itself with the
// authenticated user, and starts the request with no status: a client cannot create
// an approved request.
func (csrStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if r, ok := registry.UserFrom(ctx); ok {
		csr.Spec.Username, csr.Spec.UID = r.Name, r.UID
		csr.Spec.Groups = append([]string(nil), r.Groups...)
		if len(r.Extra) > 0 {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
			for k, v := range r.Extra {
				csr.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
			}
		}
	}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

func (csrStrategy) Default(obj runtime.Object) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Status == "" {
			csr.Status.Conditions[i].Status = corev1.ConditionTrue
		}
	}
}

// PrepareForUpdate keeps the stored spec: a request cannot be edited once made,
// only approved, denied or issued through its status.
func (csrStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*certificatesv1.CertificateSigningRequest).Spec = *old.(*certificatesv1.CertificateSigningRequest).Spec.DeepCopy()
}

func (csrStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateCSR(obj.(*certificatesv1.CertificateSigningRequest), nil)
}

// ValidateUpdate also guards the status, which the server routes through updates of
// the status subresource: decisions (Approved, Denied, Failed) cannot be withdrawn
// and an issued certificate cannot be replaced. mizzen has no approval subresource
// yet, so approval conditions are added through the status, unlike upstream.
func (csrStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	csr, oldCSR := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	allErrs := validateCSR(csr, oldCSR)
	conditionsPath := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if countConditions(csr, t) < countConditions(oldCSR, t) {
			allErrs = append(allErrs, field.Forbidden(conditionsPath, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !bytes.Equal(csr.Status.Certificate, oldCSR.Status.Certificate) && len(oldCSR.Status.Certificate) > 0 {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
	}
	return allErrs
}

func countConditions(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) int {
	n := 0
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			n++
		}
	}
	return n
}

var validUsages = []string{
	"any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment",
	"decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel",
	"ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime",
	"server auth", "signing", "timestamping",
}

// validateCSR checks a request; old is the stored request on update (nil on create),
// whose existing oddities stay accepted as upstream keeps them.
func validateCSR(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var allErrs field.ErrorList
	specPath := field.NewPath("spec")
	if err := checkRequest(csr.Spec.Request); err != nil {
		allErrs = append(allErrs, field.Invalid(specPath.Child("request"), csr.Spec.Request, err.Error()))
	}
	usagesPath := specPath.Child("usages")
	if len(csr.Spec.Usages) == 0 {
		allErrs = append(allErrs, field.Required(usagesPath, ""))
	}
	if old == nil || !hasUnknownUsage(old.Spec.Usages) {
		for i, u := range csr.Spec.Usages {
			if !slices.Contains(validUsages, string(u)) {
				allErrs = append(allErrs, field.NotSupported(usagesPath.Index(i), u, validUsages))
			}
		}
	}
	if old == nil || !hasDuplicateUsage(old.Spec.Usages) {
		seen := map[certificatesv1.KeyUsage]bool{}
		for i, u := range csr.Spec.Usages {
			if seen[u] {
				allErrs = append(allErrs, field.Duplicate(usagesPath.Index(i), u))
			}
			seen[u] = true
		}
	}
	signerPath := specPath.Child("signerName")
	if csr.Spec.SignerName == legacyUnknownSignerName && (old == nil || old.Spec.SignerName != legacyUnknownSignerName) {
		allErrs = append(allErrs, field.Invalid(signerPath, csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		allErrs = append(allErrs, validateSignerName(csr.Spec.SignerName, signerPath)...)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < minExpirationSeconds {
		allErrs = append(allErrs, field.Invalid(specPath.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	allErrs = append(allErrs, validateConditions(csr, old, field.NewPath("status", "conditions"))...)
	// A certificate is checked when it is set or changed.
	if old == nil || !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		if err := checkCertificate(csr.Status.Certificate); err != nil {
			allErrs = append(allErrs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return allErrs
}

func hasUnknownUsage(usages []certificatesv1.KeyUsage) bool {
	for _, u := range usages {
		if !slices.Contains(validUsages, string(u)) {
			return true
		}
	}
	return false
}

func hasDuplicateUsage(usages []certificatesv1.KeyUsage) bool {
	seen := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		if seen[u] {
			return true
		}
		seen[u] = true
	}
	return false
}

// checkCertificate accepts an empty certificate, or one or more PEM CERTIFICATE
// blocks without headers that each hold parseable certificates.
func checkCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// checkRequest checks that the request is a PEM-encoded, correctly signed PKCS#10
// certificate request.
func checkRequest(request []byte) error {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// validateSignerName requires "<domain>/<path>", e.g. "example.com/signer-name".
func validateSignerName(signer string, fldPath *field.Path) field.ErrorList {
	if signer == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	domain, path, found := strings.Cut(signer, "/")
	if !found || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(fldPath, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var allErrs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		allErrs = append(allErrs, field.TooLong(fldPath, domain, validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, label := range labels {
		if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
			for _, msg := range errs {
				allErrs = append(allErrs, field.Invalid(fldPath, domain, fmt.Sprintf("validating label %q: %s", label, msg)))
			}
			break
		}
	}
	if len(labels) < 2 {
		allErrs = append(allErrs, field.Invalid(fldPath, domain, "should be a domain with at least two segments separated by dots"))
	}
	maxPath := validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1
	if len(path) > maxPath {
		allErrs = append(allErrs, field.TooLong(fldPath, path, maxPath))
	}
	for _, msg := range validation.IsDNS1123Subdomain(path) {
		allErrs = append(allErrs, field.Invalid(fldPath, path, fmt.Sprintf("validating component %q: %s", path, msg)))
	}
	return allErrs
}

var (
	conditionStatuses = []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
	// Decisions can only be true.
	trueOnlyConditions = []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed}
)

func validateConditions(csr, old *certificatesv1.CertificateSigningRequest, fldPath *field.Path) field.ErrorList {
	// Stored requests keep what they already had.
	var allowBoth, allowDuplicates, allowEmptyType bool
	if old != nil {
		allowBoth = countConditions(old, certificatesv1.CertificateApproved) > 0 && countConditions(old, certificatesv1.CertificateDenied) > 0
		seen := map[certificatesv1.RequestConditionType]bool{}
		for _, c := range old.Status.Conditions {
			allowDuplicates = allowDuplicates || seen[c.Type]
			allowEmptyType = allowEmptyType || c.Type == ""
			seen[c.Type] = true
		}
	}
	var allErrs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	var approved, denied bool
	for i, c := range csr.Status.Conditions {
		condPath := fldPath.Index(i)
		if c.Type == "" && !allowEmptyType {
			allErrs = append(allErrs, field.Required(condPath.Child("type"), ""))
		}
		allowed := conditionStatuses
		if slices.Contains(trueOnlyConditions, c.Type) {
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			allErrs = append(allErrs, field.Required(condPath.Child("status"), ""))
		case !slices.Contains(allowed, string(c.Status)):
			allErrs = append(allErrs, field.NotSupported(condPath.Child("status"), c.Status, allowed))
		}
		if !allowBoth {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					allErrs = append(allErrs, field.Invalid(fldPath, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					allErrs = append(allErrs, field.Invalid(fldPath, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !allowDuplicates {
			if seen[c.Type] {
				allErrs = append(allErrs, field.Duplicate(condPath.Child("type"), c.Type))
			}
			seen[c.Type] = true
		}
	}
	return allErrs
}
