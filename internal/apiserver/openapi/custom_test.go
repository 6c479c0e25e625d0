package openapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
)

func customResource(kind string, model *spec.Schema) *registry.Resource {
	return &registry.Resource{
		GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"}, Resource: kind + "s", Kind: kind, Namespaced: true,
		New:          func() runtime.Object { return &unstructured.Unstructured{} },
		NewList:      func() runtime.Object { return &unstructured.UnstructuredList{} },
		OpenAPIModel: model,
	}
}

// TestCustomResourceV2Definitions: the v2 document describes a custom resource as
// upstream's v2 conversion does: value limits kept, nodes that keep unknown fields or
// are nullable without type or properties, and a resource that keeps unknown fields
// at its root as a bare object.
func TestCustomResourceV2Definitions(t *testing.T) {
	maxLen := int64(5)
	str := func(extra func(*spec.Schema)) spec.Schema {
		s := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
		if extra != nil {
			extra(&s)
		}
		return s
	}
	object := func(props map[string]spec.Schema) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: props}}
	}
	opaque := object(map[string]spec.Schema{"x": str(nil)})
	opaque.Extensions = spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}
	nullable := object(map[string]spec.Schema{"y": str(nil)})
	nullable.Nullable = true
	foo := object(map[string]spec.Schema{"spec": object(map[string]spec.Schema{
		"quxType": str(func(s *spec.Schema) { s.Pattern = "in-tree|out-of-tree"; s.MaxLength = &maxLen }),
		"opaque":  opaque,
		"maybe":   nullable,
	})})
	foo.Description = "Foo CRD for Testing"
	root := object(map[string]spec.Schema{"spec": object(nil)})
	root.Description = "keeps unknown fields at its root"
	root.Extensions = spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}

	docs, err := Build(append(testResources(), customResource("Foo", &foo), customResource("Open", &root)))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	docs.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi/v2", nil))
	var doc struct {
		Definitions map[string]map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	fooDef := doc.Definitions["com.example.v1.Foo"]
	props := fooDef["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	qux := props["quxType"].(map[string]any)
	if qux["pattern"] != "in-tree|out-of-tree" || qux["maxLength"] != float64(5) {
		t.Errorf("quxType = %v, want its pattern and maxLength", qux)
	}
	for _, name := range []string{"opaque", "maybe"} {
		p := props[name].(map[string]any)
		if p["type"] != nil || p["properties"] != nil || p["x-kubernetes-preserve-unknown-fields"] != nil || p["nullable"] != nil {
			t.Errorf("%s = %v, want neither type, properties nor the v3-only markers", name, p)
		}
	}
	openDef := doc.Definitions["com.example.v1.Open"]
	if openDef["type"] != "object" || openDef["properties"] != nil || openDef["description"] != nil || openDef["x-kubernetes-group-version-kind"] == nil {
		t.Errorf("root-preserving definition = %v, want a bare object with its group-version-kind", openDef)
	}
}
