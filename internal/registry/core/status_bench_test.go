package core_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkStatusWrites measures the status writes kubelets and controllers make,
// through a real apiserver: the figures include the client's own work.
func BenchmarkStatusWrites(b *testing.B) {
	c := startClient(b)
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
	pod, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node, err = c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pod status PUT", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			pod.Status.Message = fmt.Sprint(i)
			pod.Status.Phase = corev1.PodRunning
			pod.Status.PodIP = "10.0.0.1"
			if pod, err = c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pod status PATCH", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"try %d"}]}}`, i)
			if _, err := c.CoreV1().Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("node status PUT", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: fmt.Sprint(i)}}
			node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
			if node, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
