package apiserver

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/apiserver/compression"
	"mizzen/internal/storage"
)

// TestProtobufListIsTheSerializers: a protobuf list written around the entries'
// cached encodings has the bytes the protobuf serializer gives the list object, and
// the cached encodings are the ones a watch sends.
func TestProtobufListIsTheSerializers(t *testing.T) {
	s := fuzzServer(t)
	s.log = slog.New(slog.DiscardHandler)
	h := &resourceHandler{Resource: fuzzPodResource}
	for _, n := range []int{0, 1, 3, 200} {
		var entries []*storage.Entry
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "12345"}}
		for i := 0; i < n; i++ {
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default", ResourceVersion: fmt.Sprint(100 + i), Labels: map[string]string{"i": fmt.Sprint(i)}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: string(bytes.Repeat([]byte("x"), i))}}},
			}
			entries = append(entries, cachedEntry(t, s, pod))
			list.Items = append(list.Items, *pod)
		}
		list.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		want := httptest.NewRecorder()
		s.writeObject(want, 200, list, mediaProtobuf)
		got := httptest.NewRecorder()
		s.writeProtobufList(got, h, entries, 12345)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("%d pods: the list's bytes differ from the serializer's:\n got %q\nwant %q", n, got.Body.Bytes(), want.Body.Bytes())
		}
		if cl := got.Header().Get("Content-Length"); cl != fmt.Sprint(want.Body.Len()) {
			t.Errorf("%d pods: Content-Length %s, body %d bytes", n, cl, want.Body.Len())
		}
		for _, e := range entries {
			cached, _ := e.Encoded(1, func(runtime.Object) ([]byte, error) { t.Fatal("not cached"); return nil, nil })
			obj, err := e.Object()
			if err != nil {
				t.Fatal(err)
			}
			direct, _ := s.encodeProtobuf(obj)
			if !bytes.Equal(cached, direct) {
				t.Fatalf("cached encoding of %s is not the object's", e.Key)
			}
		}
	}
	if storage.DecodedEntry("u", &unstructured.Unstructured{}, nil, nil).HasProtobuf() {
		t.Error("a type without protobuf counted as protobuf")
	}
}

// TestJSONListIsTheSerializers: a JSON list joined from the entries' cached encodings
// (which name their kind, as a watch event's object does) has the bytes the JSON
// serializer gives the list object, whose items, as upstream's, do not.
func TestJSONListIsTheSerializers(t *testing.T) {
	s := fuzzServer(t)
	s.log = slog.New(slog.DiscardHandler)
	h := &resourceHandler{Resource: fuzzPodResource}
	for _, n := range []int{0, 1, 3} {
		var entries []*storage.Entry
		// Upstream's empty list has "items":[], as the joined one.
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "12345"}, Items: []corev1.Pod{}}
		for i := 0; i < n; i++ {
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default", ResourceVersion: fmt.Sprint(100 + i)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			}
			entries = append(entries, cachedEntry(t, s, pod))
			item := *pod
			item.TypeMeta = metav1.TypeMeta{}
			list.Items = append(list.Items, item)
		}
		list.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		want := httptest.NewRecorder()
		s.writeObject(want, 200, list, mediaJSON)
		got := httptest.NewRecorder()
		s.writeJSONList(got, h, entries, 12345)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("%d pods: the list's bytes differ from the serializer's:\n got %s\nwant %s", n, got.Body.Bytes(), want.Body.Bytes())
		}
		for _, e := range entries {
			if cached, _ := e.Encoded(0, s.encodeJSONItem); !bytes.HasPrefix(cached, []byte(`{"kind":"Pod","apiVersion":"v1",`)) {
				t.Fatalf("the cached encoding of %s, a watch event's object, lost its kind: %s", e.Key, cached)
			}
		}
	}
}

// TestGzippedListsAreWrittenFromKeptChunks: a list past the compression threshold,
// to a client that accepts gzip, is written from runs of items compressed once and
// kept on the resource, and decodes to the plain list, also after an item changed.
func TestGzippedListsAreWrittenFromKeptChunks(t *testing.T) {
	s := fuzzServer(t)
	s.log = slog.New(slog.DiscardHandler)
	h := &resourceHandler{Resource: fuzzPodResource}
	var entries []*storage.Entry
	pod := func(i, rv int) *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: "default", ResourceVersion: fmt.Sprint(rv)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: fmt.Sprintf("registry.example/app:%d", rv)}}},
		}
	}
	for i := range 2000 {
		entries = append(entries, cachedEntry(t, s, pod(i, 100+i)))
	}
	for _, f := range []struct {
		name  string
		slot  int
		write func(http.ResponseWriter, *resourceHandler, []*storage.Entry, int64)
	}{{"JSON", storage.JSONSlot, s.writeJSONList}, {"protobuf", storage.ProtobufSlot, s.writeProtobufList}} {
		t.Run(f.name, func(t *testing.T) {
			for round := range 3 {
				if round == 2 {
					entries[1000] = cachedEntry(t, s, pod(1000, 5000))
				}
				plain := httptest.NewRecorder()
				f.write(plain, h, entries, 12345)
				rec := httptest.NewRecorder()
				cw := compression.NewWriter(rec)
				f.write(cw, h, entries, 12345)
				if err := cw.Close(); err != nil {
					t.Fatal(err)
				}
				if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Content-Length") != "" {
					t.Fatalf("headers %v", rec.Header())
				}
				zr, err := gzip.NewReader(rec.Body)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(zr)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !bytes.Equal(got, plain.Body.Bytes()) {
					t.Fatalf("round %d: the gzipped list (%d bytes) is not the plain one (%d)", round, len(got), plain.Body.Len())
				}
				if _, chunks := h.listChunks(f.slot).Size(); chunks == 0 {
					t.Fatalf("round %d: no compressed items kept", round)
				}
			}
		})
	}
}
