package util

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// podServer answers pod creates as an apiserver would, in the request's content
// type: the pod gets its generated name and a spec the caller does not read. With
// exists set, it refuses with 409 AlreadyExists.
func podServer(t *testing.T, exists bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/ns/pods" {
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
		pod, isPod := obj.(*corev1.Pod)
		if err != nil || !isPod {
			http.Error(w, "not a pod", http.StatusBadRequest)
			return
		}
		var out runtime.Object = pod
		code := http.StatusCreated
		if exists {
			status := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, pod.GenerateName).Status()
			out, code = &status, http.StatusConflict
		} else {
			pod.Name = pod.GenerateName + "x7k2q"
			pod.UID = "0c1d"
			pod.Spec.NodeName = "node-a"
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

func TestCreatedNameRefusesWhatHoldsNoName(t *testing.T) {
	for _, tc := range []struct{ body, contentType string }{
		{"", runtime.ContentTypeProtobuf},
		{"k8s\x00", runtime.ContentTypeProtobuf},
		{"k8s\x00\x12\x05\x0a\x03\x0a\x01", runtime.ContentTypeProtobuf}, // truncated
		{"{}", runtime.ContentTypeProtobuf},
		{`{"metadata":{}}`, runtime.ContentTypeJSON},
		{`{"metadata":`, runtime.ContentTypeJSON},
	} {
		if name, err := createdName([]byte(tc.body), tc.contentType); err == nil {
			t.Errorf("createdName(%q, %s) = %q; want an error", tc.body, tc.contentType, name)
		}
	}
}

// FuzzCreatedName feeds arbitrary answers to the name reader: it must not panic, and
// a name it returns is never empty.
func FuzzCreatedName(f *testing.F) {
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
		if name, err := createdName(body, contentType); err == nil && name == "" {
			t.Errorf("createdName(%q) = empty name, no error", body)
		}
	})
}
