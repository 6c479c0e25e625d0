package certificates_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationCSRSubresourcesKeepAnnotations: a patch through /approval or /status
// changes the conditions and the metadata it carries, as upstream's strategies keep
// the request's labels and annotations (conformance: CSR API operations).
func TestIntegrationCSRSubresourcesKeepAnnotations(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t)).CertificatesV1().CertificateSigningRequests()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "e2e.example.com"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := c.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/e2e", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	approval, err := c.Patch(ctx, csr.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patchedapproval":"true"}},"status":{"conditions":[{"type":"ApprovalPatch","status":"True","reason":"e2e"}]}}`),
		metav1.PatchOptions{}, "approval")
	if err != nil {
		t.Fatal(err)
	}
	if approval.Annotations["patchedapproval"] != "true" || len(approval.Status.Conditions) != 1 {
		t.Errorf("after patching /approval: annotations %v, conditions %v", approval.Annotations, approval.Status.Conditions)
	}
	status, err := c.Patch(ctx, csr.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patchedstatus":"true"}},"status":{"conditions":[{"type":"ApprovalPatch","status":"True","reason":"e2e"},{"type":"StatusPatch","status":"True","reason":"e2e"}]}}`),
		metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if status.Annotations["patchedstatus"] != "true" || status.Annotations["patchedapproval"] != "true" || len(status.Status.Conditions) != 2 {
		t.Errorf("after patching /status: annotations %v, conditions %v", status.Annotations, status.Status.Conditions)
	}
	if string(status.Spec.Request) != string(csr.Spec.Request) {
		t.Error("the request changed through /status")
	}
}
