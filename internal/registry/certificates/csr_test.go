package certificates

import (
	"mizzen/internal/registry"

	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"reflect"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func newRequestPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:node-1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCSRValidate(t *testing.T) {
	r := Resources()[0]
	if r.Namespaced || !r.HasStatus || !reflect.DeepEqual(r.ShortNames, []string{"csr"}) {
		t.Errorf("identity = %+v", r)
	}
	request := newRequestPEM(t)
	tests := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   []fieldErr
	}{
		{"valid", func(*certificatesv1.CertificateSigningRequest) {}, nil},
		{"not PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.request"}}},
		{"wrong PEM block", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}})
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.request"}}},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" },
			[]fieldErr{{field.ErrorTypeRequired, "spec.signerName"}}},
		{"signer without path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.signerName"}}},
		{"signer with single-label domain", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.signerName"}}},
		{"legacy signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.signerName"}}},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil },
			[]fieldErr{{field.ErrorTypeRequired, "spec.usages"}}},
		{"unknown and duplicate usages", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{"client auth", "teleport", "client auth"}
		}, []fieldErr{{field.ErrorTypeNotSupported, "spec.usages[1]"}, {field.ErrorTypeDuplicate, "spec.usages[2]"}}},
		{"short expiration", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](60) },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.expirationSeconds"}}},
		{"approved and denied", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: "Approved"}, {Type: "Denied"}}
		}, []fieldErr{{field.ErrorTypeInvalid, "status.conditions"}}},
		{"approved false", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: "Approved", Status: corev1.ConditionFalse}}
		}, []fieldErr{{field.ErrorTypeNotSupported, "status.conditions[0].status"}}},
		{"not a certificate", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("junk") },
			[]fieldErr{{field.ErrorTypeInvalid, "status.certificate"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
				Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: "kubernetes.io/kube-apiserver-client-kubelet",
					Usages: []certificatesv1.KeyUsage{"digital signature", "client auth"}},
			}
			tt.mutate(csr)
			r.Strategy.Default(csr)
			assertErrs(t, r.Strategy.Validate(ctx, csr), tt.want)
		})
	}
}

func TestCSRConditionStatusDefaultsToTrue(t *testing.T) {
	r := Resources()[0]
	csr := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{
		Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: "Approved"}}}}
	r.Strategy.Default(csr)
	if got := csr.Status.Conditions[0].Status; got != corev1.ConditionTrue {
		t.Errorf("condition status = %q, want True", got)
	}
}

func TestCSRSpecIsKeptOnUpdate(t *testing.T) {
	r := Resources()[0]
	old := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/a", Username: "alice"}}
	updated := old.DeepCopy()
	updated.Spec.SignerName = "example.com/b"
	updated.Spec.Username = "mallory"
	r.Strategy.PrepareForUpdate(ctx, updated, old)
	if updated.Spec.SignerName != "example.com/a" || updated.Spec.Username != "alice" {
		t.Errorf("spec after update = %+v, want the stored spec", updated.Spec)
	}
}

func TestCSRFieldsAndPrint(t *testing.T) {
	r := Resources()[0]
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", CreationTimestamp: threeDaysAgo},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/signer", Username: "alice", ExpirationSeconds: ptr.To[int32](3600)},
	}
	if !fields.SelectorFromSet(fields.Set{"spec.signerName": "example.com/signer"}).Matches(r.Fields(csr)) {
		t.Errorf("spec.signerName selector does not match")
	}
	assertColumns(t, r, "Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition")
	tests := []struct {
		name       string
		conditions []certificatesv1.RequestConditionType
		issued     bool
		want       string
	}{
		{"pending", nil, false, "Pending"},
		{"approved and issued", []certificatesv1.RequestConditionType{"Approved"}, true, "Approved,Issued"},
		{"denied", []certificatesv1.RequestConditionType{"Denied"}, false, "Denied"},
		{"approved but failed", []certificatesv1.RequestConditionType{"Approved", "Failed"}, false, "Approved,Failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := csr.DeepCopy()
			for _, typ := range tt.conditions {
				c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue})
			}
			if tt.issued {
				c.Status.Certificate = []byte("cert")
			}
			want := []interface{}{"csr-1", "3d", "example.com/signer", "alice", "60m", tt.want}
			if got := r.Printer.Row(c); !reflect.DeepEqual(got, want) {
				t.Errorf("row = %#v, want %#v", got, want)
			}
		})
	}
}

func TestCSRRequestorComesFromTheServer(t *testing.T) {
	r := Resources()[0]
	forged := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			Spec: certificatesv1.CertificateSigningRequestSpec{Username: "system:admin", Groups: []string{"system:masters"},
				Extra: map[string]certificatesv1.ExtraValue{"x": {"y"}}},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
				{Type: "Approved", Status: corev1.ConditionTrue}}},
		}
	}
	anonymous := forged()
	r.Strategy.PrepareForCreate(ctx, anonymous)
	if anonymous.Spec.Username != "" || anonymous.Spec.Groups != nil || anonymous.Spec.Extra != nil || len(anonymous.Status.Conditions) != 0 {
		t.Errorf("client-supplied identity or status kept: %+v", anonymous)
	}
	csr := forged()
	r.Strategy.PrepareForCreate(registry.WithUser(ctx, registry.User{Name: "system:node:n1", UID: "u1",
		Groups: []string{"system:nodes", "system:authenticated"}}), csr)
	want := certificatesv1.CertificateSigningRequestSpec{Username: "system:node:n1", UID: "u1", Groups: []string{"system:nodes", "system:authenticated"}}
	if !reflect.DeepEqual(csr.Spec, want) {
		t.Errorf("spec = %+v, want %+v", csr.Spec, want)
	}
}

func TestCSRStatusUpdates(t *testing.T) {
	r := Resources()[0]
	old := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: newRequestPEM(t), SignerName: "example.com/signer",
			Usages: []certificatesv1.KeyUsage{"client auth"}},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: "Approved", Status: corev1.ConditionTrue}}},
	}
	tests := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   []fieldErr
	}{
		{"add a custom condition", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: "example.com/Checked", Status: corev1.ConditionFalse})
		}, nil},
		{"withdraw the approval", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Conditions = nil },
			[]fieldErr{{field.ErrorTypeForbidden, "status.conditions"}}},
		{"condition without status", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: "example.com/Checked"})
		}, []fieldErr{{field.ErrorTypeRequired, "status.conditions[1].status"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := old.DeepCopy()
			tt.mutate(c)
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, c, old), tt.want)
		})
	}

	issued := old.DeepCopy()
	issued.Status.Certificate = selfSignedPEM(t)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, issued, old), nil)
	replaced := issued.DeepCopy()
	replaced.Status.Certificate = selfSignedPEM(t)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, replaced, issued), []fieldErr{{field.ErrorTypeForbidden, "status.certificate"}})
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestCSRNames(t *testing.T) {
	r := Resources()[0]
	for _, name := range []string{"node-csr-AbC_123", "system:node:n1", "UPPER"} {
		if msgs := r.ValidateName(name, false); len(msgs) != 0 {
			t.Errorf("%q rejected: %v", name, msgs)
		}
	}
	if msgs := r.ValidateName("a/b", false); len(msgs) == 0 {
		t.Errorf("a name with '/' was accepted")
	}
}
