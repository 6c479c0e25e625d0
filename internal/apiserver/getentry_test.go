package apiserver

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/storage"
)

// TestGetFromEntryIsTheSerializers: a get written from a cache entry's cached
// encoding has the bytes writeObject gives the object, in JSON (whether a list or a
// watch encoded the entry first) and protobuf; YAML is left to writeObject.
func TestGetFromEntryIsTheSerializers(t *testing.T) {
	s := fuzzServer(t)
	s.log = slog.New(slog.DiscardHandler)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: "42", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	watchJSON := func(obj runtime.Object) ([]byte, error) {
		var buf bytes.Buffer
		err := s.codecs.json.Encode(obj, &buf)
		return buf.Bytes(), err
	}
	for _, c := range []struct {
		name, mediaType string
		first           func(*storage.Entry)
		decoded         bool // an entry that keeps its object decoded, as a custom resource's
	}{
		{"json", mediaJSON, nil, false},
		{"json after a list", mediaJSON, func(e *storage.Entry) { _, _ = e.Encoded(0, s.encodeJSONItem) }, false},
		{"json after a watch", mediaJSON, func(e *storage.Entry) { _, _ = e.Encoded(0, watchJSON) }, false},
		{"protobuf", mediaProtobuf, nil, false},
		{"json, decoded", mediaJSON, nil, true},
		{"json after a list, decoded", mediaJSON, func(e *storage.Entry) { _, _ = e.Encoded(0, s.encodeJSONItem) }, true},
	} {
		e := cachedEntry(t, s, pod)
		if c.decoded {
			e = storage.DecodedEntry("/registry/pods/default/p", pod, nil, nil)
		}
		if c.first != nil {
			c.first(e)
		}
		want := httptest.NewRecorder()
		s.writeObject(want, 200, pod, c.mediaType)
		for i := 0; i < 2; i++ { // encoded, then cached
			got := httptest.NewRecorder()
			if !s.writeEntry(got, e, c.mediaType) {
				t.Fatalf("%s: not written from the entry", c.name)
			}
			if got.Code != 200 || got.Header().Get("Content-Type") != c.mediaType || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Fatalf("%s: %d %s %q, want %q", c.name, got.Code, got.Header().Get("Content-Type"), got.Body.Bytes(), want.Body.Bytes())
			}
		}
	}
	if s.writeEntry(httptest.NewRecorder(), cachedEntry(t, s, pod), "application/yaml") {
		t.Error("YAML written from the entry")
	}
}

// cachedEntry is the entry the server's watch cache keeps for a pod: its protobuf
// encoding alone.
func cachedEntry(t testing.TB, s *Server, pod *corev1.Pod) *storage.Entry {
	t.Helper()
	rv, err := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &storage.ResourceConfig{Kind: corev1.SchemeGroupVersion.WithKind("Pod"), New: func() runtime.Object { return &corev1.Pod{} }, Protobuf: s.encodeProtobuf}
	e, err := storage.NewEntry(cfg, "/registry/pods/"+pod.Namespace+"/"+pod.Name, pod.DeepCopy(), rv)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
