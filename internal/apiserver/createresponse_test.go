package apiserver_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// TestCreateAnswersAsTheSerializer: a pod created over protobuf is answered 201 with
// the bytes the protobuf serializer gives the created pod, and that pod is the one a
// get over JSON then reads (resourceVersion, uid and managedFields included).
func TestCreateAnswersAsTheSerializer(t *testing.T) {
	cfg := apiserver.Start(t)
	ctx := context.Background()
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	pcfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	proto := kubernetes.NewForConfigOrDie(pcfg)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
	}
	var code int
	raw, err := proto.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Body(pod).Do(ctx).StatusCode(&code).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusCreated {
		t.Errorf("status %d, want 201", code)
	}
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	obj, _, err := ser.Decode(raw, nil, nil)
	if err != nil {
		t.Fatalf("the response does not decode: %v", err)
	}
	created := obj.(*corev1.Pod)
	var again bytes.Buffer
	if err := ser.Encode(created, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again.Bytes()) {
		t.Errorf("the response's bytes are not the serializer's for the pod they hold:\n got %q\nwant %q", raw, again.Bytes())
	}
	got, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.APIVersion, got.Kind = "v1", "Pod"
	if created.ResourceVersion == "" || created.UID == "" || len(created.ManagedFields) != 1 {
		t.Errorf("created pod's resourceVersion %q, uid %q, %d managedFields entries", created.ResourceVersion, created.UID, len(created.ManagedFields))
	}
	if !equality.Semantic.DeepEqual(created, got) {
		t.Errorf("the create answered\n%+v\nthe get reads\n%+v", created, got)
	}
}
