package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/registry"
)

func TestMutatingReinvocation(t *testing.T) {
	var firstCalls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if r.URL.Path == "/first" {
			firstCalls.Add(1)
		} else if !strings.Contains(string(review.Request.Object.Raw), `"second":"yes"`) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType, resp.Patch = &pt, []byte(`[{"op":"add","path":"/metadata/labels","value":{"second":"yes"}}]`)
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none := admissionregistrationv1.SideEffectClassNone
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	hook := func(name, path string, policy *admissionregistrationv1.ReinvocationPolicyType) admissionregistrationv1.MutatingWebhook {
		u := srv.URL + path
		return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"*"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects: &none, ReinvocationPolicy: policy}
	}
	store := admissiontest.New(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Webhooks: []admissionregistrationv1.MutatingWebhook{hook("first", "/first", &ifNeeded)}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Webhooks: []admissionregistrationv1.MutatingWebhook{hook("second", "/second", nil)}},
	)
	compiler, err := cel.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	p := New(true, store, nil, compiler, nil, nil, nil)
	a := &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: "", Name: "cm",
		Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, User: registry.User{Name: "u"}}
	// Reinvocation is the chain's: it calls the plugin's Reinvoke after its first pass.
	chain := admission.NewChain(admission.Plugin{Name: MutatingPluginName, Handler: p})
	if err := chain.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if a.Object.(*corev1.ConfigMap).Labels["second"] != "yes" {
		t.Errorf("patch not applied: %+v", a.Object)
	}
	if n := firstCalls.Load(); n != 2 {
		t.Errorf("the IfNeeded webhook was called %d times, want 2 (once more after the later change)", n)
	}

	// A dry run is refused by a webhook that may have side effects.
	some := admissionregistrationv1.SideEffectClassSome
	h := hook("side", "/first", nil)
	h.SideEffects = &some
	store.Add(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Webhooks: []admissionregistrationv1.MutatingWebhook{h}})
	a.DryRun = true
	if err := p.Admit(context.Background(), a); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `admission webhook "side" does not support dry run`) {
		t.Errorf("dry run: %v", err)
	}
}

// TestWebhookTimeout: the webhook is told its deadline in ?timeout= as upstream's
// client tells it, and a webhook slower than timeoutSeconds fails the request with an
// error naming that URL and the deadline.
func TestWebhookTimeout(t *testing.T) {
	release := make(chan struct{})
	seen := make(chan string, 4)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.RawQuery
		<-release
	}))
	defer srv.Close()
	defer close(release)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	u := srv.URL + "/slow"
	store := admissiontest.New(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "slow.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"*"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects: &none, FailurePolicy: &fail, TimeoutSeconds: ptrTo(int32(1))}}})
	compiler, err := cel.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	p := New(false, store, nil, compiler, nil, nil, nil)
	a := &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Name: "cm",
		Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, User: registry.User{Name: "u"}}
	err = p.Validate(context.Background(), a)
	if q := <-seen; q != "timeout=1s" {
		t.Errorf("the webhook saw query %q, want timeout=1s", q)
	}
	want := `failed calling webhook "slow.example.com": failed to call webhook: Post "` + u + `?timeout=1s": context deadline exceeded`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to contain %s", err, want)
	}
}

func ptrTo[T any](v T) *T { return &v }
