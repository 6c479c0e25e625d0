package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

func csrPEM(t *testing.T, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "carol"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestCertificateAdmission: approving a CSR needs `approve` on its signer, issuing a
// certificate needs `sign`, whatever RBAC says of the subresources; and no
// kube-apiserver-client CSR may ask for system:masters.
func TestCertificateAdmission(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)

	_, err := admin.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "masters"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Request: csrPEM(t, "root", "system:masters"), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if err := wantForbidden(err, `certificatesigningrequests.certificates.k8s.io "masters" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`); err != nil {
		t.Error(err)
	}

	_, err = admin.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "carol"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/issuer",
			Request: csrPEM(t, "carol", "dev"), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// bob may write both subresources but holds no signer verbs yet.
	_, bob := userClient(t, srv, "bob")
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "csr-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"}}}}, metav1.CreateOptions{}))
	bind := func(name, role string) {
		mustCreate(t)(admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}}}, metav1.CreateOptions{}))
	}
	bind("bob-writes-csrs", "csr-writer")

	approve := func() error {
		c, err := bob.CertificatesV1().CertificateSigningRequests().Get(ctx, "carol", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by bob"}}
		_, err = bob.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "carol", c, metav1.UpdateOptions{})
		return err
	}
	eventually(t, "bob's approval refused by CertificateApproval", func() error {
		return wantForbidden(approve(), `certificatesigningrequests.certificates.k8s.io "carol" is forbidden: user not permitted to approve requests with signerName "example.com/issuer"`)
	})

	// approve on every signer of the domain is enough.
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "example-approver"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"approve"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"example.com/*"}}}}, metav1.CreateOptions{}))
	bind("bob-approves", "example-approver")
	eventually(t, "bob approves once granted approve on example.com/*", approve)

	issue := func() error {
		c, err := bob.CertificatesV1().CertificateSigningRequests().Get(ctx, "carol", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Certificate = selfSignedPEM(t)
		_, err = bob.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	}
	if err := wantForbidden(issue(), `certificatesigningrequests.certificates.k8s.io "carol" is forbidden: user not permitted to sign requests with signerName "example.com/issuer"`); err != nil {
		t.Error(err)
	}
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "example-signer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"sign"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"example.com/issuer"}}}}, metav1.CreateOptions{}))
	bind("bob-signs", "example-signer")
	eventually(t, "bob issues once granted sign on the signer", issue)
}
