package restgroups

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// Status is written through the status subresource and validated as upstream does.
func TestStatusSubresources(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))

	t.Run("ingress load balancer", func(t *testing.T) {
		ings := c.NetworkingV1().Ingresses("default")
		ing, err := ings.Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
			// A client cannot create an ingress with a status.
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
				Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.9"}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ing.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("status kept on create: %+v", ing.Status)
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "300.0.0.1"}}
		_, err = ings.UpdateStatus(ctx, ing, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeFieldValueInvalid, "status.loadBalancer.ingress[0].ip"})
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
		updated, err := ings.UpdateStatus(ctx, ing, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if updated.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" {
			t.Errorf("status = %+v", updated.Status)
		}
	})

	t.Run("certificate signing request decisions", func(t *testing.T) {
		csrs := c.CertificatesV1().CertificateSigningRequests()
		csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: requestPEM(t), SignerName: "example.com/signer",
				Usages: []certificatesv1.KeyUsage{"client auth"}, Username: "forged"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if csr.Spec.Username == "forged" {
			t.Errorf("the client chose its own username")
		}
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: "Approved", Status: corev1.ConditionTrue, Reason: "Test"}}
		approved, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		approved.Status.Conditions = nil
		_, err = csrs.UpdateStatus(ctx, approved, metav1.UpdateOptions{})
		wantInvalid(t, err, cause{metav1.CauseTypeForbidden, "status.conditions"})
		// A spec change through the main resource is ignored: the stored spec stays.
		approved.Spec.SignerName = "example.com/other"
		kept, err := csrs.Update(ctx, approved, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if kept.Spec.SignerName != "example.com/signer" || len(kept.Status.Conditions) != 1 {
			t.Errorf("after update: spec.signerName=%q conditions=%v", kept.Spec.SignerName, kept.Status.Conditions)
		}
	})
}
