package customresources

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestMutatingWebhookPatchIsPruned: a mutating webhook's patch that adds a field
// the CRD's schema does not know is pruned before storage, as upstream does (the
// conformance spec "should mutate custom resource with pruning").
func TestMutatingWebhookPatchIsPruned(t *testing.T) {
	dyn, cfg, _ := setup(t)
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, PatchType: &pt,
			Patch: []byte(`[{"op":"add","path":"/spec/commonName","value":"mutated.example.com"},{"op":"add","path":"/spec/notInSchema","value":"yes"}]`)}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer hook.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	url, none := hook.URL+"/mutate", admissionregistrationv1.SideEffectClassNone
	ctx := context.Background()
	_, err := kubernetes.NewForConfigOrDie(cfg).AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutate-certs"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mutate-certs.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"certs.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"certificates"}}}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The configuration takes effect from the watch cache: create until it has.
	n := 0
	eventually(t, "the webhook mutates certificates", func() string {
		n++
		created, err := dyn.Resource(certGVR).Namespace("default").Create(ctx, cert("c"+string(rune('a'+n%26))+"-"+string(rune('a'+n/26%26)), validSpec()), metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		spec := created.Object["spec"].(map[string]interface{})
		if spec["commonName"] != "mutated.example.com" {
			return "not mutated yet"
		}
		if _, kept := spec["notInSchema"]; kept {
			t.Fatalf("the webhook's field unknown to the schema was kept: %v", spec)
		}
		return ""
	})
}
