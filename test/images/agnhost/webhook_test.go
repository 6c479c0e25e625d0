package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func callWebhook(t *testing.T, path, object string) *admissionv1.AdmissionResponse {
	t.Helper()
	in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u1", Object: runtime.RawExtension{Raw: []byte(object)}}}
	body, _ := json.Marshal(in)
	rec := httptest.NewRecorder()
	webhookMux().ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "u1" {
		t.Fatalf("%s: %v %s", path, err, rec.Body.String())
	}
	return out.Response
}

func TestWebhookHandlers(t *testing.T) {
	if r := callWebhook(t, "/configmaps", `{"data":{"webhook-e2e-test":"webhook-disallow"}}`); r.Allowed || r.Result.Message != unwantedConfigMap {
		t.Errorf("/configmaps disallowed: %+v", r)
	}
	if r := callWebhook(t, "/configmaps", `{"data":{"a":"b"}}`); !r.Allowed {
		t.Errorf("/configmaps allowed: %+v", r)
	}
	if r := callWebhook(t, "/always-deny", `{}`); r.Allowed || r.Result.Message != alwaysDenyMessage {
		t.Errorf("/always-deny: %+v", r)
	}
	if r := callWebhook(t, "/add-label", `{"metadata":{"name":"x"}}`); !r.Allowed || string(r.Patch) != `[{"op":"add","path":"/metadata/labels","value":{"added-label":"yes"}}]` {
		t.Errorf("/add-label: %+v %s", r, r.Patch)
	}
	if r := callWebhook(t, "/pods", `{"spec":{"containers":[{"name":"webhook-disallow"}]}}`); r.Allowed {
		t.Errorf("/pods: %+v", r)
	}
}
