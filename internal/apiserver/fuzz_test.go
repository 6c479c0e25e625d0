package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"mizzen/internal/registry"
)

var fuzzPodResource = &registry.Resource{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "pods", Kind: "Pod", Namespaced: true,
	New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
}

func fuzzServer(t testing.TB) *Server {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, corev1.SchemeGroupVersion)
	return &Server{codecs: newCodecs(scheme)}
}

// FuzzDecodeBody: any request body either decodes into a Pod or is refused with a
// status error; it never panics.
func FuzzDecodeBody(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"x":1}}}`,
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n",
		`{"apiVersion":"apps/v1","kind":"Pod"}`,
		`{"kind":"Pod","spec":{"containers":[{"resources":{"limits":{"cpu":"1e309"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"}}`,
		"\x00mz1garbage",
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed), "application/json")
		f.Add([]byte(seed), "application/yaml")
		f.Add([]byte(seed), "application/vnd.kubernetes.protobuf")
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte, mediaType string) {
		obj := &corev1.Pod{}
		_, err := s.codecs.decodeInto(mediaType, body, corev1.SchemeGroupVersion.WithKind("Pod"), obj)
		if err != nil {
			if _, ok := err.(interface{ Status() metav1.Status }); !ok {
				t.Fatalf("decode error is not a status error: %T %v", err, err)
			}
		}
	})
}

// FuzzApplyPatch: any patch document of any patch type either applies or is refused
// with a status error; it never panics.
func FuzzApplyPatch(f *testing.F) {
	for _, seed := range []struct{ typ, patch string }{
		{string(types.JSONPatchType), `[{"op":"replace","path":"/metadata/labels","value":{"a":"b"}}]`},
		{string(types.JSONPatchType), `[{"op":"remove","path":"/spec/containers/5"}]`},
		{string(types.JSONPatchType), `[{"op":"copy","from":"/spec","path":"/spec/containers/0/x"}]`},
		{string(types.MergePatchType), `{"spec":{"containers":null}}`},
		{string(types.MergePatchType), `{"metadata":{"name":5}}`},
		{string(types.StrategicMergePatchType), `{"spec":{"containers":[{"name":"c","image":"j"}]}}`},
		{string(types.StrategicMergePatchType), `{"spec":{"containers":[{"$patch":"delete","name":"c"}]}}`},
		{string(types.StrategicMergePatchType), `{"$retainKeys":["a"],"spec":{"$setElementOrder/containers":[{"name":"x"}]}}`},
		{string(types.ApplyYAMLPatchType), `apiVersion: v1`},
		{"text/plain", `x`},
	} {
		f.Add(seed.typ, []byte(seed.patch))
	}
	s := fuzzServer(f)
	h := &resourceHandler{Resource: fuzzPodResource}
	f.Fuzz(func(t *testing.T, patchType string, patch []byte) {
		current := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}
		req := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/ns/pods/p", nil)
		_, err := s.applyPatch(httptest.NewRecorder(), req, h, current, patchType, patch)
		if err != nil {
			if _, ok := err.(interface{ Status() metav1.Status }); !ok {
				t.Fatalf("patch error is not a status error: %T %v", err, err)
			}
		}
	})
}
