package util

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	got, err := TrimManagedFields(pod)
	if err != nil || got != any(pod) {
		t.Fatalf("TrimManagedFields = %v, %v; want the same pod, nil", got, err)
	}
	if pod.ManagedFields != nil || pod.Name != "p" || pod.Labels["a"] != "b" {
		t.Errorf("after the transform: %+v; want only managedFields dropped", pod.ObjectMeta)
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "m",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	if _, err := TrimManagedFields(meta); err != nil || meta.ManagedFields != nil {
		t.Errorf("metadata-only object: managedFields %v, err %v; want none", meta.ManagedFields, err)
	}
	// What is not an object (a tombstone) passes through unchanged.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}
	if got, err := TrimManagedFields(tomb); err != nil || got != any(tomb) {
		t.Errorf("tombstone: %v, %v; want it unchanged", got, err)
	}
}
