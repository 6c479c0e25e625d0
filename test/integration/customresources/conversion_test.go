package customresources

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
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
