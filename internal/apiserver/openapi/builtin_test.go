package openapi

import (
	"encoding/json"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/spec3"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"

	"mizzen/internal/registry"
)

// builtinResources makes a Resource for every kind of k8s.io/api that client-go's
// scheme registers together with its list, so that every built-in type goes through
// the reflection. Names and scopes are approximate; only the types matter here.
func builtinResources() []*registry.Resource {
	known := scheme.Scheme.AllKnownTypes()
	var out []*registry.Resource
	for gvk, t := range known {
		if !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		listType, ok := known[gvk.GroupVersion().WithKind(gvk.Kind+"List")]
		if !ok {
			continue
		}
		objType := t
		_, hasStatus := objType.FieldByName("Status")
		r := &registry.Resource{
			GroupVersion: gvk.GroupVersion(),
			Resource:     strings.ToLower(gvk.Kind) + "s",
			Kind:         gvk.Kind,
			Namespaced:   true,
			New:          func() k8sruntime.Object { return reflect.New(objType).Interface().(k8sruntime.Object) },
			NewList:      func() k8sruntime.Object { return reflect.New(listType).Interface().(k8sruntime.Object) },
			HasStatus:    hasStatus,
		}
		switch gvk.Kind {
		case "Deployment", "ReplicaSet", "StatefulSet", "ReplicationController":
			r.Scale = &registry.ScaleAdapter{}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GroupVersionResource().String() < out[j].GroupVersionResource().String()
	})
	return out
}

// TestAllBuiltinTypes builds the documents for every built-in kind and checks that
// the clients' parsers accept them and find every kind. It also logs what the
// documents cost in memory.
func TestAllBuiltinTypes(t *testing.T) {
	resources := builtinResources()
	if len(resources) < 50 {
		t.Fatalf("only %d built-in kinds found", len(resources))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	docs, err := Build(resources)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d resources in %d group versions: documents hold %d bytes compressed, %d as served (v2 JSON %d, v3 %d documents); heap retained %d bytes, allocated while building %d bytes",
		len(resources), len(docs.v3)-3-countGroups(resources), docs.Size(), docs.UncompressedSize(), docs.v2.size, len(docs.v3),
		int64(after.HeapAlloc)-int64(before.HeapAlloc), after.TotalAlloc-before.TotalAlloc)

	pbDoc, err := docs.v2Proto.get()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the v2 protobuf form is built (%d bytes as served): %d bytes held", pbDoc.size, docs.Size())
	var pb openapiv2.Document
	if err := proto.Unmarshal(plain(t, pbDoc), &pb); err != nil {
		t.Fatal(err)
	}
	models, err := kubectlopenapi.NewOpenAPIData(&pb)
	if err != nil {
		t.Fatalf("kubectl's v2 parser: %v", err)
	}
	for _, r := range resources {
		if models.LookupResource(r.GroupVersionKind()) == nil {
			t.Errorf("v2 models lack %v", r.GroupVersionKind())
		}
	}
	kinds := map[gvk]bool{} // the kinds the v3 documents describe
	for key, doc := range docs.v3 {
		data := plain(t, doc)
		var parsed spec3.OpenAPI
		if err := json.Unmarshal(data, &parsed); err != nil {
			t.Errorf("v3 %s does not parse: %v", key, err)
			continue
		}
		for _, s := range parsed.Components.Schemas {
			list, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
			for _, g := range list {
				m := g.(map[string]any)
				if apiPrefix(schema.GroupVersion{Group: m["group"].(string), Version: m["version"].(string)}) == key {
					kinds[gvk{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}] = true
				}
			}
		}
	}
	for _, r := range resources {
		if !kinds[gvk{Group: r.GroupVersion.Group, Version: r.GroupVersion.Version, Kind: r.Kind}] {
			t.Errorf("v3 %s has no schema for %s", apiPrefix(r.GroupVersion), r.Kind)
		}
	}
	runtime.KeepAlive(docs)
}

func countGroups(resources []*registry.Resource) int {
	groups := map[string]bool{}
	for _, r := range resources {
		if r.GroupVersion.Group != "" {
			groups[r.GroupVersion.Group] = true
		}
	}
	return len(groups)
}

// BenchmarkBuildAllBuiltin measures building the documents for every built-in kind,
// which the apiserver does once at start.
func BenchmarkBuildAllBuiltin(b *testing.B) {
	resources := builtinResources()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(resources); err != nil {
			b.Fatal(err)
		}
	}
}
