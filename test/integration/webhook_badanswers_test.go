package integration

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/pki"
	"mizzen/internal/testing/apiserver"
)

// TestWebhookBadAnswers: a webhook that answers garbage, or presents a certificate its
// caBundle does not vouch for, gets failurePolicy's answer: Fail refuses the request
// naming the webhook, Ignore lets it through; neither writes anything on refusal.
func TestWebhookBadAnswers(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	mustNamespace(t, c, "bad-answers")
	garbage := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("this is not an AdmissionReview"))
	}))
	t.Cleanup(garbage.Close)
	// Every httptest server presents the same certificate: a CA of our own vouches
	// for none of them.
	otherCA, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "not-the-webhooks-ca")
	if err != nil {
		t.Fatal(err)
	}
	caOf := func(s *httptest.Server) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	}
	none := admissionregistrationv1.SideEffectClassNone
	cases := []struct {
		name string
		ca   []byte // the garbage server's own CA, or another server's
		want string
	}{
		{"garbage", caOf(garbage), ""},
		{"wrong-cert", otherCA.CertPEM, "x509"},
	}
	for _, tc := range cases {
		for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
			name := fmt.Sprintf("%s-%s", tc.name, strings.ToLower(string(policy)))
			url := garbage.URL + "/review"
			policy := policy
			if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: name + ".example.com",
					ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: tc.ca},
					Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
					ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": name}},
					SideEffects:    &none, AdmissionReviewVersions: []string{"v1"}, FailurePolicy: &policy}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cm := func(i int) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{"case": name}}}
			}
			if policy == admissionregistrationv1.Ignore {
				if _, err := c.CoreV1().ConfigMaps("bad-answers").Create(ctx, cm(0), metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: failurePolicy Ignore refused: %v", name, err)
				}
				continue
			}
			// The configuration takes effect from the watch cache: wait for the refusal.
			for i, deadline := 0, time.Now().Add(10*time.Second); time.Now().Before(deadline); i++ {
				if _, err = c.CoreV1().ConfigMaps("bad-answers").Create(ctx, cm(i), metav1.CreateOptions{}); err != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			want := fmt.Sprintf("failed calling webhook %q", name+".example.com")
			if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an internal error with %q and %q", name, err, want, tc.want)
			}
		}
	}
}
