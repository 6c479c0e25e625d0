package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/testing/apiserver"
)

// TestAPIServiceProtobuf: a client speaking protobuf, as the aggregator clientset e2e
// uses does, creates an APIService and reads it back.
func TestAPIServiceProtobuf(t *testing.T) {
	srv := apiserver.StartServer(t)
	scheme := runtime.NewScheme()
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ser := protobuf.NewSerializer(scheme, scheme)
	httpClient, err := rest.HTTPClientFor(srv.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	const media = "application/vnd.kubernetes.protobuf"
	port := int32(7443)
	in := &apiregistrationv1.APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 200,
			Service: &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api", Port: &port}, InsecureSkipTLSVerify: true},
	}
	var body bytes.Buffer
	if err := ser.Encode(in, &body); err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, body io.Reader) (int, runtime.Object) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, srv.AdminConfig.Host+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", media)
		if body != nil {
			req.Header.Set("Content-Type", media)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") != media {
			t.Fatalf("%s %s: %d %s: %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
		}
		obj, _, err := ser.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("%s %s: decoding the answer: %v", method, path, err)
		}
		return resp.StatusCode, obj
	}
	code, obj := do(http.MethodPost, "/apis/apiregistration.k8s.io/v1/apiservices", &body)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %#v", code, obj)
	}
	created := obj.(*apiregistrationv1.APIService)
	if created.UID == "" || created.Spec.Service == nil || *created.Spec.Service.Port != 7443 || created.Spec.GroupPriorityMinimum != 2000 || !created.Spec.InsecureSkipTLSVerify {
		t.Errorf("created %+v", created)
	}
	_, obj = do(http.MethodGet, "/apis/apiregistration.k8s.io/v1/apiservices", nil)
	list, ok := obj.(*apiregistrationv1.APIServiceList)
	if !ok {
		t.Fatalf("list answered %T", obj)
	}
	found := false
	for _, item := range list.Items {
		found = found || item.Name == in.Name && item.Spec.VersionPriority == 200
	}
	if !found {
		t.Errorf("the list lacks %s", in.Name)
	}
}
