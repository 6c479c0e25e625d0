package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// reviewLog is a fake webhook that keeps every AdmissionRequest it answers.
type reviewLog struct {
	mu   sync.Mutex
	seen []admissionv1.AdmissionRequest
}

func (l *reviewLog) requests() []admissionv1.AdmissionRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]admissionv1.AdmissionRequest(nil), l.seen...)
}

// hpaWebhook serves /v1-target, which sets an autoscaling/v1 HPA's
// targetCPUUtilizationPercentage to 42 (a field only v1 has), and /record, which
// allows everything; both keep what they were sent.
func hpaWebhook(t *testing.T) (*httptest.Server, []byte, *reviewLog) {
	log := &reviewLog{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.mu.Lock()
		log.seen = append(log.seen, *review.Request)
		log.mu.Unlock()
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if r.URL.Path == "/v1-target" {
			var hpa autoscalingv1.HorizontalPodAutoscaler
			if err := json.Unmarshal(review.Request.Object.Raw, &hpa); err != nil || hpa.APIVersion != "autoscaling/v1" {
				resp = &admissionv1.AdmissionResponse{UID: review.Request.UID, Result: &metav1.Status{Message: "not an autoscaling/v1 object: " + string(review.Request.Object.Raw)}}
			} else {
				pt := admissionv1.PatchTypeJSONPatch
				resp.PatchType, resp.Patch = &pt, []byte(`[{"op":"add","path":"/spec/targetCPUUtilizationPercentage","value":42}]`)
			}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), log
}

// TestWebhookMatchPolicyEquivalent: webhooks and a policy registered for
// autoscaling/v1 HorizontalPodAutoscalers see a request made through autoscaling/v2
// as a v1 object (kind and resource v1, requestKind and requestResource v2), the
// mutating webhook's v1 patch lands in the v2 object, and matchPolicy Exact leaves
// the other version alone.
func TestWebhookMatchPolicyEquivalent(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	srv, ca, log := hpaWebhook(t)
	mustNamespace(t, c, "equiv")
	none := admissionregistrationv1.SideEffectClassNone
	exact := admissionregistrationv1.Exact
	url := func(p string) *string { s := srv.URL + p; return &s }
	v1Rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"autoscaling"}, APIVersions: []string{"v1"}, Resources: []string{"horizontalpodautoscalers"}}}}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-target"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "target.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/v1-target"), CABundle: ca},
			Rules: v1Rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-exact"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "exact.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/record"), CABundle: ca},
			Rules: v1Rules, MatchPolicy: &exact, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-ceiling"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: v1Rules[0]}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.apiVersion == 'autoscaling/v1' && object.spec.maxReplicas <= 10",
				MessageExpression: "'maxReplicas ' + string(object.spec.maxReplicas) + ' above 10, asked through ' + request.requestKind.version + ', seen as ' + request.kind.version",
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-ceiling"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "hpa-ceiling",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := func(name string, max int32) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: max,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	}
	// The configurations take effect from the watch cache: wait until the policy does.
	var denyErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, denyErr = c.AutoscalingV2().HorizontalPodAutoscalers("equiv").Create(ctx, hpa("big", 20), metav1.CreateOptions{}); denyErr != nil {
			break
		}
		_ = c.AutoscalingV2().HorizontalPodAutoscalers("equiv").Delete(ctx, "big", metav1.DeleteOptions{})
	}
	want := "ValidatingAdmissionPolicy 'hpa-ceiling' with binding 'hpa-ceiling' denied request: maxReplicas 20 above 10, asked through v2, seen as v1"
	if !apierrors.IsInvalid(denyErr) || !strings.Contains(denyErr.Error(), want) {
		t.Fatalf("policy through v2: %v, want %q", denyErr, want)
	}
	for deadline := time.Now().Add(10 * time.Second); len(log.requests()) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, _ = c.AutoscalingV2().HorizontalPodAutoscalers("equiv").Create(ctx, hpa("probe", 20), metav1.CreateOptions{})
	}
	got, err := c.AutoscalingV2().HorizontalPodAutoscalers("equiv").Create(ctx, hpa("web", 5), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Metrics) != 1 || got.Spec.Metrics[0].Resource == nil || got.Spec.Metrics[0].Resource.Target.AverageUtilization == nil ||
		*got.Spec.Metrics[0].Resource.Target.AverageUtilization != 42 {
		t.Fatalf("the v1 webhook's patch did not reach the v2 object: metrics %+v", got.Spec.Metrics)
	}
	var seen *admissionv1.AdmissionRequest
	for _, r := range log.requests() {
		if r.Name == "web" || strings.Contains(string(r.Object.Raw), `"name":"web"`) {
			if r.RequestKind == nil || r.RequestKind.Version == "v1" {
				t.Errorf("matchPolicy Exact for v1 was called for a v2 request, or requestKind is missing: %+v", r.RequestKind)
			}
			r := r
			seen = &r
		}
	}
	if seen == nil {
		t.Fatal("the mutating webhook never saw the v2 create")
	}
	if seen.Kind.Version != "v1" || seen.Resource.Version != "v1" || seen.RequestKind.Version != "v2" || seen.RequestResource.Version != "v2" ||
		seen.RequestKind.Kind != "HorizontalPodAutoscaler" || seen.RequestResource.Resource != "horizontalpodautoscalers" {
		t.Errorf("review named kind %v resource %v requestKind %v requestResource %v", seen.Kind, seen.Resource, seen.RequestKind, seen.RequestResource)
	}
	// A v1 request goes to both webhooks as it is: kind and requestKind agree.
	before := len(log.requests())
	if _, err := c.AutoscalingV1().HorizontalPodAutoscalers("equiv").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "v1"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := log.requests()[before:]
	if len(after) != 2 {
		t.Fatalf("a v1 create reached %d webhooks, want 2", len(after))
	}
	for _, r := range after {
		if r.Kind.Version != "v1" || r.RequestKind == nil || r.RequestKind.Version != "v1" {
			t.Errorf("v1 create reviewed as kind %v requestKind %v", r.Kind, r.RequestKind)
		}
	}
}
