package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// maxTrustBundleSize is the largest spec.trustBundle upstream accepts (1 MiB).
const maxTrustBundleSize = 1 << 20

// clusterTrustBundles is certificates.k8s.io/v1 clustertrustbundles: cluster-scoped
// sets of X.509 trust anchors, optionally tied to a signer, which the kubelet projects
// into pods (clusterTrustBundle volume sources).
func clusterTrustBundles() *registry.Resource {
	return &registry.Resource{
		GroupVersion: certificatesv1.SchemeGroupVersion,
		Resource:     "clustertrustbundles",
		Kind:         "ClusterTrustBundle",
		SingularName: "clustertrustbundle",
		// The name's rule depends on spec.signerName (a signer's bundles are named
		// "<signer with / as :>:<rest>"), so the strategy checks it; here only that it
		// can be one URL path segment.
		ValidateName: pathSegmentName,
		New:          func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		NewList:      func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
		Strategy:     ctbStrategy{},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": obj.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
		},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "SignerName", Type: "string", Description: certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]},
			},
			Row: func(obj runtime.Object) []interface{} {
				ctb := obj.(*certificatesv1.ClusterTrustBundle)
				signer := "<none>"
				if ctb.Spec.SignerName != "" {
					signer = ctb.Spec.SignerName
				}
				return []interface{}{ctb.Name, signer}
			},
		},
	}
}

type ctbStrategy struct{ registry.BaseStrategy }

func (ctbStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateCTB(obj.(*certificatesv1.ClusterTrustBundle), true)
}

// ValidateUpdate keeps the signer, and parses the bundle again only when it changed
// (as upstream, so a stored bundle that a newer rule would refuse stays editable).
func (ctbStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ctb, oldCTB := obj.(*certificatesv1.ClusterTrustBundle), old.(*certificatesv1.ClusterTrustBundle)
	allErrs := validateCTB(ctb, ctb.Spec.TrustBundle != oldCTB.Spec.TrustBundle)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(ctb.Spec.SignerName, oldCTB.Spec.SignerName, field.NewPath("spec", "signerName"))...)
}

func validateCTB(ctb *certificatesv1.ClusterTrustBundle, parseBundle bool) field.ErrorList {
	var allErrs field.ErrorList
	namePath := field.NewPath("metadata", "name")
	for _, msg := range ctbNameProblems(ctb.Name, ctb.Spec.SignerName) {
		allErrs = append(allErrs, field.Invalid(namePath, ctb.Name, msg))
	}
	if ctb.Spec.SignerName != "" {
		allErrs = append(allErrs, validateSignerName(ctb.Spec.SignerName, field.NewPath("spec", "signerName"))...)
	}
	if parseBundle {
		allErrs = append(allErrs, validateTrustBundle(ctb.Spec.TrustBundle, field.NewPath("spec", "trustBundle"))...)
	}
	return allErrs
}

// CTBNamePrefix is the prefix every ClusterTrustBundle of a signer is named with.
func CTBNamePrefix(signerName string) string {
	return strings.ReplaceAll(signerName, "/", ":") + ":"
}

// ctbNameProblems is upstream's name rule: without a signer no ":" at all; with one,
// the signer's prefix, and a DNS subdomain after it.
func ctbNameProblems(name, signerName string) []string {
	if signerName == "" {
		if strings.Contains(name, ":") {
			return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
		}
		return apimachineryvalidation.NameIsDNSSubdomain(name, false)
	}
	prefix := CTBNamePrefix(signerName)
	if !strings.HasPrefix(name, prefix) {
		return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signerName, prefix)}
	}
	return apimachineryvalidation.NameIsDNSSubdomain(strings.TrimPrefix(name, prefix), false)
}

// validateTrustBundle requires one or more distinct CA certificates as header-less
// PEM CERTIFICATE blocks, with upstream's messages.
func validateTrustBundle(in string, fldPath *field.Path) field.ErrorList {
	if len(in) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(fldPath, fmt.Sprintf("<value omitted, len %d>", len(in)), maxTrustBundleSize)}
	}
	var allErrs field.ErrorList
	invalid := func(format string, args ...any) {
		allErrs = append(allErrs, field.Invalid(fldPath, "<value omitted>", fmt.Sprintf(format, args...)))
	}
	seen := map[string][]int{}
	var order []string
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			invalid("entry %d has bad block type: %v", i, b.Type)
			continue
		}
		if len(b.Headers) != 0 {
			invalid("entry %d has PEM block headers", i)
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			invalid("entry %d does not parse as X.509", i)
			continue
		}
		if !cert.IsCA {
			invalid("entry %d does not have the CA bit set", i)
			continue
		}
		if !cert.BasicConstraintsValid {
			invalid("entry %d has invalid basic constraints", i)
			continue
		}
		if _, ok := seen[string(b.Bytes)]; !ok {
			order = append(order, string(b.Bytes))
		}
		seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
	}
	// A malformed block says enough; no further complaints about duplicates.
	if len(allErrs) != 0 {
		return allErrs
	}
	if len(seen) == 0 {
		invalid("at least one trust anchor must be provided")
	}
	for _, der := range order {
		if indices := seen[der]; len(indices) > 1 {
			invalid("duplicate trust anchor (indices %v)", indices)
		}
	}
	return allErrs
}
