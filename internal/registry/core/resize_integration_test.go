package core_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationPodResize: pods/resize changes a pod's cpu and memory (and nothing
// else), bumps its generation, refuses a change of QoS class, and reads as the pod.
func TestIntegrationPodResize(t *testing.T) {
	cfg := apiserver.Start(t)
	c := startClientFor(t, cfg)
	ctx := context.Background()
	pods := c.CoreV1().Pods("default")
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "resizable"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c1", Image: "busybox", Resources: res("100m", "20Mi")}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The main endpoint still refuses a change of resources.
	viaMain := created.DeepCopy()
	viaMain.Spec.Containers[0].Resources = res("200m", "40Mi")
	if _, err := pods.Update(ctx, viaMain, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("resources through the main endpoint: err = %v, want 422", err)
	}

	want := created.DeepCopy()
	want.Spec.Containers[0].Resources = res("200m", "40Mi")
	want.Spec.Containers[0].Image = "ignored-by-resize"
	resized, err := pods.UpdateResize(ctx, "resizable", want, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize: %v", err)
	}
	if got := resized.Spec.Containers[0].Resources.Requests; got.Cpu().String() != "200m" || got.Memory().String() != "40Mi" {
		t.Errorf("requests after resize = %v", got)
	}
	if resized.Spec.Containers[0].Image != "busybox" || resized.Generation != 2 {
		t.Errorf("image %q generation %d, want busybox and 2", resized.Spec.Containers[0].Image, resized.Generation)
	}

	patched, err := pods.Patch(ctx, "resizable", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"300m"}}}]}}`), metav1.PatchOptions{}, "resize")
	if err != nil || patched.Spec.Containers[0].Resources.Requests.Cpu().String() != "300m" {
		t.Fatalf("patch resize = %v, %v", patched, err)
	}

	// Limits equal to requests would make the pod Guaranteed: refused.
	qos := patched.DeepCopy()
	qos.Spec.Containers[0].Resources.Limits = qos.Spec.Containers[0].Resources.Requests.DeepCopy()
	if _, err := pods.UpdateResize(ctx, "resizable", qos, metav1.UpdateOptions{}); err == nil {
		t.Error("a resize changing the QoS class was accepted")
	} else {
		wantInvalid(t, err, "spec", metav1.CauseTypeFieldValueInvalid, "Pod QOS Class may not change as a result of resizing")
	}

	// GET pods/resize reads the pod.
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).
		Namespace("default").Get(ctx, "resizable", metav1.GetOptions{}, "resize")
	if err != nil || u.GetKind() != "Pod" || u.GetGeneration() != 3 {
		t.Errorf("get pods/resize = %v %v, %v", u.GetKind(), u.GetGeneration(), err)
	}
}

func startClientFor(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(cfg)
}
