package certificates

import (
	"crypto/ecdsa"
	"crypto/ed25519"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func certPEM(t *testing.T, isCA bool) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, IsCA: isCA, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestClusterTrustBundle(t *testing.T) {
	r := findResource(t, "clustertrustbundles")
	if r.Namespaced || r.HasStatus {
		t.Errorf("identity = %+v", r)
	}
	ca, other, leaf := certPEM(t, true), certPEM(t, true), certPEM(t, false)
	ctb := func(name, signer, bundle string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
	}
	cases := []struct {
		name string
		obj  *certificatesv1.ClusterTrustBundle
		want []fieldErr
	}{
		{"no signer", ctb("plain", "", ca+other), nil},
		{"a signer's, named with its prefix", ctb("test.test:signer-one:1", "test.test/signer-one", ca), nil},
		{"a signer's without its prefix", ctb("plain", "test.test/signer-one", ca), []fieldErr{{field.ErrorTypeInvalid, "metadata.name"}}},
		{"colon without a signer", ctb("a:b", "", ca), []fieldErr{{field.ErrorTypeInvalid, "metadata.name"}}},
		{"empty bundle", ctb("plain", "", ""), []fieldErr{{field.ErrorTypeInvalid, "spec.trustBundle"}}},
		{"not a CA", ctb("plain", "", leaf), []fieldErr{{field.ErrorTypeInvalid, "spec.trustBundle"}}},
		{"a CA twice", ctb("plain", "", ca+ca), []fieldErr{{field.ErrorTypeInvalid, "spec.trustBundle"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertErrs(t, r.Strategy.Validate(ctx, tc.obj), tc.want)
		})
	}
	old := ctb("test.test:signer-one:1", "test.test/signer-one", ca)
	moved := ctb("test.test:signer-one:1", "test.test/signer-two", ca)
	errs := r.Strategy.ValidateUpdate(ctx, moved, old)
	if len(errs) == 0 || errs[len(errs)-1].Field != "spec.signerName" {
		t.Errorf("changing the signer: errs = %v", errs)
	}
	updated := ctb("test.test:signer-one:1", "test.test/signer-one", other)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)

	assertColumns(t, r, "Name", "SignerName")
	if got, want := r.Printer.Row(old), []interface{}{"test.test:signer-one:1", "test.test/signer-one"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	if got := r.Fields(old)["spec.signerName"]; got != "test.test/signer-one" {
		t.Errorf("spec.signerName field = %q", got)
	}
}

func TestPodCertificateRequest(t *testing.T) {
	r := findResource(t, "podcertificaterequests")
	if !r.Namespaced || !r.HasStatus {
		t.Errorf("identity = %+v", r)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "req", Namespace: "ns"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/e2e", PodName: "test-pod", PodUID: "uid-1",
			ServiceAccountName: "default", ServiceAccountUID: "uid-2", NodeName: "test-node", NodeUID: "uid-3", StubPKCS10Request: stub}}
	r.Strategy.Default(pcr)
	if pcr.Spec.MaxExpirationSeconds == nil || *pcr.Spec.MaxExpirationSeconds != 86400 {
		t.Fatalf("maxExpirationSeconds defaulted to %v, want 86400", pcr.Spec.MaxExpirationSeconds)
	}
	withStatus := pcr.DeepCopy()
	withStatus.Status.CertificateChain = "x"
	r.Strategy.PrepareForCreate(ctx, withStatus)
	if withStatus.Status.CertificateChain != "" {
		t.Error("create kept a status")
	}
	assertErrs(t, r.Strategy.Validate(ctx, pcr), nil)

	bad := pcr.DeepCopy()
	bad.Spec.PodUID = ""
	bad.Spec.StubPKCS10Request = []byte("junk")
	*bad.Spec.MaxExpirationSeconds = 60
	assertErrs(t, r.Strategy.Validate(ctx, bad), []fieldErr{
		{field.ErrorTypeInvalid, "spec.podUID"}, {field.ErrorTypeInvalid, "spec.maxExpirationSeconds"}, {field.ErrorTypeInvalid, "spec.stubPKCS10Request"}})

	relabelled := pcr.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, relabelled, pcr), nil)
	resigned := pcr.DeepCopy()
	resigned.Spec.SignerName = "example.com/other"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, resigned, pcr), []fieldErr{{field.ErrorTypeInvalid, "spec"}})

	// Issued as upstream's conformance spec issues it: an hour's certificate.
	now := time.Now().Truncate(time.Second)
	issued := pcr.DeepCopy()
	issued.Status = certificatesv1.PodCertificateRequestStatus{
		CertificateChain: certPEM(t, false),
		Conditions:       []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "E2E", Message: "Issued", LastTransitionTime: metav1.NewTime(now)}},
		NotBefore:        &metav1.Time{Time: now}, NotAfter: &metav1.Time{Time: now.Add(time.Hour)}, BeginRefreshAt: &metav1.Time{Time: now.Add(15 * time.Minute)},
	}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, issued, pcr), nil)
	noChain := issued.DeepCopy()
	noChain.Status.CertificateChain = ""
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, noChain, pcr), []fieldErr{{field.ErrorTypeRequired, "status.certificateChain"}})
	reissued := issued.DeepCopy()
	reissued.Status.Conditions[0].Message = "again"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, reissued, issued), []fieldErr{{field.ErrorTypeForbidden, "status"}})
}
