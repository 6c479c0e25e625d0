package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestStatusSubresourceKeepsMetadataChanges: a merge patch through services/status that
// sets an annotation and the load balancer status changes both, as upstream's service
// status strategy resets only the spec (the suite's "should complete a service status
// lifecycle" waits for the annotation); a spec change through status is still dropped,
// and a deployment's labels stay as they were (upstream resets them there).
func TestStatusSubresourceKeepsMetadataChanges(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	svcs := c.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lifecycle"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"annotations":{"patchedstatus":"true"},"labels":{"l":"v"}},"spec":{"externalName":"ignored.example"},"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.1"}]}}}`
	got, err := svcs.Patch(ctx, "lifecycle", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["patchedstatus"] != "true" || got.Labels["l"] != "v" {
		t.Errorf("metadata after the status patch: annotations %v labels %v, want the patched ones", got.Annotations, got.Labels)
	}
	if len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "203.0.113.1" {
		t.Errorf("status after the status patch: %+v", got.Status)
	}
	if got.Spec.ExternalName != "" {
		t.Errorf("the status patch changed spec.externalName to %q", got.Spec.ExternalName)
	}
	stored, err := svcs.Get(ctx, "lifecycle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Annotations["patchedstatus"] != "true" {
		t.Errorf("stored annotations %v, want patchedstatus=true", stored.Annotations)
	}

	deps := c.AppsV1().Deployments("default")
	if _, err := deps.Create(ctx, newDeployment("labelled", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep, err := deps.Patch(ctx, "labelled", types.MergePatchType, []byte(`{"metadata":{"labels":{"l":"v"},"annotations":{"a":"b"}}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if dep.Labels["l"] != "" || dep.Annotations["a"] != "b" {
		t.Errorf("deployment after a status patch: labels %v annotations %v; want labels unchanged, the annotation set", dep.Labels, dep.Annotations)
	}
}
