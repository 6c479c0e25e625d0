package customresources

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
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// converter is a conversion webhook: v1 has spec.size, v2 spec.dimensions.size.
func converter(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review apiextv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			t.Errorf("webhook: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &apiextv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: "Success"}}
		for _, raw := range review.Request.Objects {
			u := &unstructured.Unstructured{}
			_ = u.UnmarshalJSON(raw.Raw)
			switch review.Request.DesiredAPIVersion {
			case "conv.example.com/v2":
				size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
				unstructured.RemoveNestedField(u.Object, "spec", "size")
				_ = unstructured.SetNestedField(u.Object, size, "spec", "dimensions", "size")
			case "conv.example.com/v1":
				size, _, _ := unstructured.NestedInt64(u.Object, "spec", "dimensions", "size")
				unstructured.RemoveNestedField(u.Object, "spec", "dimensions")
				_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
			}
			u.SetAPIVersion(review.Request.DesiredAPIVersion)
			u.SetLabels(map[string]string{"converted": "yes"})
			u.SetName("renamed-by-webhook") // ignored: only labels and annotations may change
			data, _ := u.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}
}

func TestWebhookConversion(t *testing.T) {
	webhook := httptest.NewTLSServer(converter(t))
	defer webhook.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: webhook.Certificate().Raw})

	srv := startServer(t)
	dyn := dynamic.NewForConfigOrDie(srv.AdminConfig)
	crd := &unstructured.Unstructured{}
	_ = yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: boxes.conv.example.com}
spec:
  group: conv.example.com
  scope: Namespaced
  names: {plural: boxes, kind: Box}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "`+webhook.URL+`/convert"}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {dimensions: {type: object, properties: {size: {type: integer}}}}}
`), &crd.Object)
	// caBundle is []byte in the Go type: base64 in JSON.
	_ = unstructured.SetNestedField(crd.Object, b64(caPEM), "spec", "conversion", "webhook", "clientConfig", "caBundle")
	ctx := context.Background()
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := schema.GroupVersionResource{Group: "conv.example.com", Version: "v1", Resource: "boxes"}
	v2 := v1
	v2.Version = "v2"
	waitServed(t, dyn, v2)

	box := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "conv.example.com/v2", "kind": "Box",
		"metadata": map[string]interface{}{"name": "b"},
		"spec":     map[string]interface{}{"dimensions": map[string]interface{}{"size": int64(4)}},
	}}
	created, err := dyn.Resource(v2).Namespace("default").Create(ctx, box, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(created.Object, "spec", "dimensions", "size"); size != 4 || created.GetName() != "b" {
		t.Errorf("created through v2: %v", created.Object)
	}
	got, err := dyn.Resource(v1).Namespace("default").Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 4 {
		t.Errorf("read through v1: %v", got.Object)
	}
	if got.GetLabels()["converted"] != "yes" || got.GetName() != "b" {
		t.Errorf("metadata after conversion: %v", got.Object["metadata"])
	}
	list, err := dyn.Resource(v2).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list through v2: %v %v", err, list)
	}
	if size, _, _ := unstructured.NestedInt64(list.Items[0].Object, "spec", "dimensions", "size"); size != 4 {
		t.Errorf("listed through v2: %v", list.Items[0].Object)
	}

	// An admission webhook registered for v1 gets a v2 create as a v1 object, and its
	// v1 patch reaches the object stored through v2.
	admit := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON(review.Request.Object.Raw)
		if _, v1Size, _ := unstructured.NestedInt64(u.Object, "spec", "size"); !v1Size || review.Request.RequestResource == nil || review.Request.RequestResource.Version != "v2" {
			resp = &admissionv1.AdmissionResponse{UID: review.Request.UID, Result: &metav1.Status{Message: "want a v1 box asked for through v2, got " + string(review.Request.Object.Raw)}}
		} else {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType, resp.Patch = &pt, []byte(`[{"op":"replace","path":"/spec/size","value":9}]`)
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	defer admit.Close()
	admitURL := admit.URL + "/admit"
	none := admissionregistrationv1.SideEffectClassNone
	kube := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "boxes-v1"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "boxes.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &admitURL, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: admit.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"conv.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"boxes"}}}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var size int64
	for i, deadline := 0, time.Now().Add(10*time.Second); size != 9 && time.Now().Before(deadline); i++ {
		box.SetName(fmt.Sprintf("admitted-%d", i))
		created, err := dyn.Resource(v2).Namespace("default").Create(ctx, box, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		size, _, _ = unstructured.NestedInt64(created.Object, "spec", "dimensions", "size")
		time.Sleep(100 * time.Millisecond)
	}
	if size != 9 {
		t.Errorf("the v1 admission webhook's patch did not reach the box created through v2: size %d", size)
	}

	// A webhook that is down fails the request with upstream's words, and changes nothing.
	webhook.Close()
	_, err = dyn.Resource(v2).Namespace("default").Get(ctx, "b", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for boxes.conv.example.com failed") {
		t.Errorf("webhook down: %v", err)
	}
}

func b64(data []byte) string {
	out, _ := json.Marshal(data)
	return strings.Trim(string(out), `"`)
}
