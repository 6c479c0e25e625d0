package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// signerGrants allows verb on the signers it names, as "verb name".
type signerGrants map[string]bool

func (g signerGrants) Authorize(_ context.Context, a authz.Attributes) (bool, string) {
	ok := a.Group == "certificates.k8s.io" && a.Resource == "signers" && g[a.Verb+" "+a.Name]
	return ok, ""
}

func csrRequest(t *testing.T, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "someone", Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func csrAttrs(op admission.Operation, sub string, csr, old *certificatesv1.CertificateSigningRequest) *admission.Attributes {
	a := &admission.Attributes{Operation: op, Subresource: sub, Name: csr.Name, Object: csr,
		Kind:     certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
		Resource: certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"),
		User:     registry.User{Name: "alice"}}
	if old != nil {
		a.OldObject = old
	}
	return a
}

func newCSR(signer string, request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "req"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: request}}
}

func wantForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if msg == "" {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) {
		t.Errorf("err = %v, want 403 with %q", err, msg)
	}
}

func TestCertificateApproval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants signerGrants
		signer string
		want   string
	}{
		{"granted on the signer", signerGrants{"approve example.com/foo": true}, "example.com/foo", ""},
		{"granted on the domain", signerGrants{"approve example.com/*": true}, "example.com/foo", ""},
		{"sign is not approve", signerGrants{"sign example.com/foo": true}, "example.com/foo",
			`certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to approve requests with signerName "example.com/foo"`},
		{"other signer", signerGrants{"approve example.com/bar": true}, "example.com/foo",
			`user not permitted to approve requests with signerName "example.com/foo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR(tc.signer, nil)
			wantForbidden(t, NewApproval(tc.grants).Validate(context.Background(), csrAttrs(admission.Update, "approval", csr, csr)), tc.want)
		})
	}
	// Other writes of a CSR are not this plugin's business.
	csr := newCSR("example.com/foo", nil)
	wantForbidden(t, NewApproval(signerGrants{}).Validate(context.Background(), csrAttrs(admission.Update, "", csr, csr)), "")
}

func TestCertificateSigning(t *testing.T) {
	old := newCSR("example.com/foo", nil)
	issued := old.DeepCopy()
	issued.Status.Certificate = []byte("cert")
	conditionOnly := old.DeepCopy()
	conditionOnly.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: "True"}}
	for _, tc := range []struct {
		name   string
		grants signerGrants
		obj    *certificatesv1.CertificateSigningRequest
		want   string
	}{
		{"granted", signerGrants{"sign example.com/foo": true}, issued, ""},
		{"granted on the domain", signerGrants{"sign example.com/*": true}, issued, ""},
		{"not granted", signerGrants{"approve example.com/foo": true}, issued,
			`user not permitted to sign requests with signerName "example.com/foo"`},
		{"certificate unchanged", signerGrants{}, conditionOnly, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantForbidden(t, NewSigning(tc.grants).Validate(context.Background(), csrAttrs(admission.Update, "status", tc.obj, old)), tc.want)
		})
	}
}

func TestCertificateSubjectRestriction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signer string
		req    []byte
		want   string
	}{
		{"masters to kube-apiserver-client", certificatesv1.KubeAPIServerClientSignerName, csrRequest(t, "dev", "system:masters"),
			"use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"},
		{"other groups", certificatesv1.KubeAPIServerClientSignerName, csrRequest(t, "dev"), ""},
		{"masters to another signer", "example.com/foo", csrRequest(t, "system:masters"), ""},
		{"unparsable", certificatesv1.KubeAPIServerClientSignerName, []byte("garbage"), "failed to parse CSR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantForbidden(t, NewSubjectRestriction().Validate(context.Background(), csrAttrs(admission.Create, "", newCSR(tc.signer, tc.req), nil)), tc.want)
		})
	}
}
