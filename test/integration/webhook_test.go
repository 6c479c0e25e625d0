package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// webhookServer answers AdmissionReviews over TLS: /deny refuses ConfigMaps holding
// the key "deny", /label adds a label, /warn allows with a warning, /slow sleeps.
func webhookServer(t *testing.T) (*httptest.Server, []byte) {
	mux := http.NewServeMux()
	handle := func(path string, respond func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			resp := respond(review.Request)
			resp.UID = review.Request.UID
			review.Response, review.Request = resp, nil
			_ = json.NewEncoder(w).Encode(review)
		})
	}
	handle("/deny", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var cm corev1.ConfigMap
		_ = json.Unmarshal(req.Object.Raw, &cm)
		if _, ok := cm.Data["deny"]; ok {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the configmap contains unwanted key and value", Code: 403}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	handle("/label", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		patch := `[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(patch)}
	})
	handle("/warn", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"seen by the webhook"}}
	})
	handle("/always-deny", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation != admissionv1.Connect || req.Kind.Kind != "PodExecOptions" || !strings.Contains(string(req.Object.Raw), `"command":["ls"]`) {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "unexpected review: " + string(req.Object.Raw)}}
		}
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "no exec here"}}
	})
	handle("/slow", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		time.Sleep(5 * time.Second)
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, ca
}

type warnings []string

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) { *w = append(*w, text) }

func TestAdmissionWebhooks(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	srv, ca := webhookServer(t)
	mustNamespace(t, c, "hooks")
	none := admissionregistrationv1.SideEffectClassNone
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	one := int32(1)
	url := func(p string) *string { s := srv.URL + p; return &s }
	rules := func(res string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{res}}}}
	}
	nsSel := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "hooks"}}
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "deny-configmaps.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/deny"), CABundle: ca},
				Rules: rules("configmaps", admissionregistrationv1.Create, admissionregistrationv1.Update), SideEffects: &none,
				AdmissionReviewVersions: []string{"v1"}, FailurePolicy: &fail},
			{Name: "warn.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/warn"), CABundle: ca},
				Rules: rules("configmaps", admissionregistrationv1.Create), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "warned", Expression: "object.metadata.name.startsWith('warn')"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "label-pods.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/label"), CABundle: ca},
				Rules: rules("pods", admissionregistrationv1.Create), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: nsSel},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The configurations take effect from the watch cache: wait until one does.
	var cmErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, cmErr = c.CoreV1().ConfigMaps("hooks").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "d-"}, Data: map[string]string{"deny": "x"}}, metav1.CreateOptions{})
		if cmErr != nil {
			break
		}
	}
	if !apierrors.IsForbidden(cmErr) || !strings.Contains(cmErr.Error(), `admission webhook "deny-configmaps.example.com" denied the request: the configmap contains unwanted key and value`) {
		t.Fatalf("denied configmap: %v", cmErr)
	}
	if _, err := c.CoreV1().ConfigMaps("hooks").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fine"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("allowed configmap: %v", err)
	}
	var seen warnings
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = &seen
	if _, err := kubernetes.NewForConfigOrDie(wcfg).CoreV1().ConfigMaps("hooks").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "warn-me"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "seen by the webhook" {
		t.Errorf("warnings %q", seen)
	}
	pod, err := c.CoreV1().Pods("hooks").Create(ctx, admissionPod("p"), metav1.CreateOptions{})
	if err != nil || pod.Labels["mutated"] != "yes" {
		t.Fatalf("mutated pod: %v %v", err, pod.Labels)
	}
	mustNamespace(t, c, "other")
	if pod, err = c.CoreV1().Pods("other").Create(ctx, admissionPod("p"), metav1.CreateOptions{}); err != nil || pod.Labels["mutated"] != "" {
		t.Fatalf("pod outside the namespaceSelector: %v %v", err, pod.Labels)
	}

	// A webhook slower than its timeout: Ignore lets the request through, Fail refuses
	// it, neither waiting past timeoutSeconds.
	for _, policy := range []admissionregistrationv1.FailurePolicyType{ignore, fail} {
		name := "slow-" + strings.ToLower(string(policy))
		p := policy
		_, err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: name + ".example.com",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/slow"), CABundle: ca},
				Rules:        rules("secrets", admissionregistrationv1.Create), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
				FailurePolicy: &p, TimeoutSeconds: &one}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var secretErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, secretErr = c.CoreV1().Secrets("hooks").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-"}}, metav1.CreateOptions{})
		if secretErr != nil {
			break
		}
	}
	if !apierrors.IsInternalError(secretErr) || !strings.Contains(secretErr.Error(), `failed calling webhook "slow-fail.example.com"`) {
		t.Fatalf("slow webhook with failurePolicy Fail: %v", secretErr)
	}
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "slow-fail", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, secretErr = c.CoreV1().Secrets("hooks").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-"}}, metav1.CreateOptions{}); secretErr == nil {
			break
		}
	}
	if secretErr != nil {
		t.Fatalf("slow webhook with failurePolicy Ignore: %v", secretErr)
	}
	// CONNECT: a webhook on pods/exec gets the exec options and refuses the exec.
	_, err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "no-exec"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "no-exec.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/always-deny"), CABundle: ca},
			Rules:        rules("pods/exec", admissionregistrationv1.Connect), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var execErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		execErr = c.CoreV1().RESTClient().Post().Namespace("hooks").Resource("pods").Name("p").SubResource("exec").
			Param("command", "ls").Param("stdout", "true").Do(ctx).Error()
		if strings.Contains(fmt.Sprint(execErr), "denied") {
			break
		}
	}
	if execErr == nil || !strings.Contains(execErr.Error(), `admission webhook "no-exec.example.com" denied the request: no exec here`) {
		t.Fatalf("exec: %v", execErr)
	}
	// Webhook configurations are never sent to webhooks: a deny-everything webhook on
	// them would lock itself in.
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
