package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func convertReview(t *testing.T, desired string, objs ...string) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u1", DesiredAPIVersion: desired}}
	req.APIVersion, req.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	for _, o := range objs {
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	body, _ := json.Marshal(req)
	rec := httptest.NewRecorder()
	conversionMux().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/crdconvert", bytes.NewReader(body)))
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("response %q: %v", rec.Body.String(), err)
	}
	if out.Response.UID != "u1" || out.Kind != "ConversionReview" {
		t.Errorf("response uid %q kind %q", out.Response.UID, out.Kind)
	}
	return out.Response
}

func TestCRDConversionWebhook(t *testing.T) {
	resp := convertReview(t, "stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd-webhook","metadata":{"name":"a"},"hostPort":"localhost:8080"}`)
	if resp.Result.Status != "Success" || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("v1 -> v2: %+v", resp)
	}
	got := string(resp.ConvertedObjects[0].Raw)
	for _, want := range []string{`"apiVersion":"stable.example.com/v2"`, `"host":"localhost"`, `"port":"8080"`} {
		if !strings.Contains(got, want) {
			t.Errorf("v1 -> v2 = %s, want %s", got, want)
		}
	}
	if strings.Contains(got, "hostPort") {
		t.Errorf("v1 -> v2 kept hostPort: %s", got)
	}

	resp = convertReview(t, "stable.example.com/v1", `{"apiVersion":"stable.example.com/v2","kind":"E2e-test-crd-webhook","metadata":{"name":"a"},"host":"h","port":"1"}`)
	if got := string(resp.ConvertedObjects[0].Raw); !strings.Contains(got, `"hostPort":"h:1"`) || strings.Contains(got, `"host":`) {
		t.Errorf("v2 -> v1 = %s", got)
	}

	resp = convertReview(t, "stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd-webhook","metadata":{"name":"a"},"hostPort":"no-port"}`)
	if resp.Result.Status != "Failure" || resp.Result.Message != "invalid hostPort value `no-port`" || len(resp.ConvertedObjects) != 0 {
		t.Errorf("bad hostPort: %+v", resp)
	}
}
