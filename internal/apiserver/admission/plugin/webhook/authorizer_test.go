package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// secretReaders lets only "admin" list secrets.
type secretReaders struct{}

func (secretReaders) Authorize(_ context.Context, a authz.Attributes) (bool, string) {
	return a.User.Name == "admin" && a.Verb == "list" && a.Resource == "secrets", ""
}

// TestMatchConditionAuthorizer: a match condition's authorizer checks the request's
// user, so the webhook (which refuses everything) is called for admin only.
func TestMatchConditionAuthorizer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Result: &metav1.Status{Message: "called"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer srv.Close()
	u := srv.URL
	none := admissionregistrationv1.SideEffectClassNone
	store := admissiontest.New(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "readers.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"*"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "reads-secrets", Expression: "authorizer.group('').resource('secrets').check('list').allowed()"}},
			SideEffects:     &none}}})
	compiler, err := cel.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	p := New(false, store, nil, compiler, nil, secretReaders{}, nil)
	for _, user := range []string{"admin", "bob"} {
		a := &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
			Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: "ns", Name: "cm",
			Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}, User: registry.User{Name: user}}
		err := p.Validate(context.Background(), a)
		called := err != nil && strings.Contains(err.Error(), `admission webhook "readers.example.com" denied the request: called`)
		if called != (user == "admin") {
			t.Errorf("%s: webhook called %v (err %v), want %v", user, called, err, user == "admin")
		}
	}
}
