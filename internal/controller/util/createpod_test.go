package util

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// podServer answers pod and Event creates as an apiserver would, in the request's
// content type: the object gets resourceVersion 42, a pod its generated name and a
// spec the caller does not read. With exists set, it refuses with 409 AlreadyExists.
func podServer(t *testing.T, exists bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || (r.URL.Path != "/api/v1/namespaces/ns/pods" && r.URL.Path != "/api/v1/namespaces/ns/events") {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		contentType := r.Header.Get("Content-Type")
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), contentType)
		if !ok {
			http.Error(w, "unsupported "+contentType, http.StatusUnsupportedMediaType)
			return
		}
		body, _ := io.ReadAll(r.Body)
		obj, _, err := info.Serializer.Decode(body, nil, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := obj
		code := http.StatusCreated
		switch o := obj.(type) {
		case *corev1.Pod:
			o.Name = o.GenerateName + "x7k2q"
			o.Spec.NodeName = "node-a"
		case *corev1.Event:
		default:
			http.Error(w, "not a pod or an Event", http.StatusBadRequest)
			return
		}
		meta, _ := apimeta.Accessor(obj)
		meta.SetUID("0c1d")
		meta.SetResourceVersion("42")
		if exists {
			status := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, meta.GetName()).Status()
			out, code = &status, http.StatusConflict
		}
		encoder := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
		data, err := runtime.Encode(encoder, out)
		if err != nil {
			t.Errorf("encoding the answer: %v", err)
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// createThrough creates a pod named web-... through podServer in contentType.
func createThrough(t *testing.T, exists bool, contentType string) (string, error) {
	srv := podServer(t, exists)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: contentType}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "web-"}}
	return CreatePod(context.Background(), client, pod)
}

func TestCreatePodReturnsTheGivenName(t *testing.T) {
	for _, contentType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		name, err := createThrough(t, false, contentType)
		if err != nil || name != "web-x7k2q" {
			t.Errorf("%s: CreatePod = %q, %v; want web-x7k2q", contentType, name, err)
		}
	}
}

func TestCreatePodKeepsTheAPIError(t *testing.T) {
	for _, contentType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		name, err := createThrough(t, true, contentType)
		if !apierrors.IsAlreadyExists(err) || name != "" {
			t.Errorf("%s: CreatePod = %q, %v; want AlreadyExists", contentType, name, err)
		}
	}
}

func TestCreatePodThroughAFakeClient(t *testing.T) {
	client := fake.NewClientset()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1"}}
	if name, err := CreatePod(context.Background(), client, pod); err != nil || name != "web-1" {
		t.Fatalf("CreatePod = %q, %v; want web-1", name, err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(context.Background(), "web-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the fake holds no pod web-1: %v", err)
	}
}

func TestReadCreatedRefusesWhatHoldsNoName(t *testing.T) {
	for _, tc := range []struct{ body, contentType string }{
		{"", runtime.ContentTypeProtobuf},
		{"k8s\x00", runtime.ContentTypeProtobuf},
		{"k8s\x00\x12\x05\x0a\x03\x0a\x01", runtime.ContentTypeProtobuf}, // truncated
		{"{}", runtime.ContentTypeProtobuf},
		{`{"metadata":{}}`, runtime.ContentTypeJSON},
		{`{"metadata":`, runtime.ContentTypeJSON},
	} {
		if meta, err := readCreated([]byte(tc.body), tc.contentType); err == nil {
			t.Errorf("readCreated(%q, %s) = %+v; want an error", tc.body, tc.contentType, meta)
		}
	}
}

// FuzzReadCreated feeds arbitrary answers to the name reader: it must not panic, and
// a name it returns is never empty.
func FuzzReadCreated(f *testing.F) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-x7k2q", Namespace: "ns"}}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), pod)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, true)
	f.Add([]byte(`{"metadata":{"name":"web-x7k2q"}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, protobuf bool) {
		contentType := runtime.ContentTypeJSON
		if protobuf {
			contentType = runtime.ContentTypeProtobuf
		}
		if meta, err := readCreated(body, contentType); err == nil && meta.name == "" {
			t.Errorf("readCreated(%q) = empty name, no error", body)
		}
	})
}

// TestEventSinkReturnsTheCreatedEvent: the sink's create answers with what was sent,
// plus the resourceVersion the apiserver gave it (what the recorder patches with).
func TestEventSinkReturnsTheCreatedEvent(t *testing.T) {
	for _, contentType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		srv := podServer(t, false)
		client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: contentType}})
		sink := newEventSink(client)
		sent := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: "web.1876"},
			InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: "ns", Name: "web"},
			Reason:         "SuccessfulCreate", Message: "Created pod: web-x7k2q", Count: 1, Type: corev1.EventTypeNormal,
		}
		created, err := sink.Create(sent)
		if err != nil {
			t.Fatalf("%s: %v", contentType, err)
		}
		want := sent.DeepCopy()
		want.ResourceVersion = "42"
		if !reflect.DeepEqual(created, want) {
			t.Errorf("%s: created %+v, want %+v", contentType, created, want)
		}
		if sent.ResourceVersion != "" {
			t.Errorf("%s: the sent Event was changed", contentType)
		}
	}
}

func TestEventSinkKeepsTheAPIError(t *testing.T) {
	srv := podServer(t, true)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf}})
	_, err := newEventSink(client).Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.1876"}})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("Create = %v; want AlreadyExists", err)
	}
}
