package storagemigration_test

import (
	"context"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationStorageVersionMigration does what upstream's conformance spec does with
// a migration behind a real mizzen apiserver: create strictly, update, patch (apply
// among them) the object and its status.
func TestIntegrationStorageVersionMigration(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t)).StoragemigrationV1().StorageVersionMigrations()
	ctx := context.Background()
	m := &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "test"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "foo"}}}
	created, err := c.Create(ctx, m, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Spec.Resource.Resource = "bar"
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing spec.resource: err = %v, want 422", err)
	}
	patched, err := c.Patch(ctx, "test", types.ApplyPatchType, []byte(`{"apiVersion":"storagemigration.k8s.io/v1","kind":"StorageVersionMigration",`+
		`"metadata":{"name":"test","labels":{"test.storagemigration.example.com":"test"}}}`), metav1.PatchOptions{FieldManager: "e2e"})
	if err != nil || patched.Labels["test.storagemigration.example.com"] != "test" || patched.Spec.Resource.Resource != "foo" {
		t.Fatalf("apply = %+v, %v", patched, err)
	}
	status := `{"apiVersion":"storagemigration.k8s.io/v1","kind":"StorageVersionMigration","metadata":{"name":"test"},` +
		`"status":{"conditions":[{"type":"TestCondition","status":"True","reason":"TestReason","message":"TestMessage","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	withStatus, err := c.Patch(ctx, "test", types.ApplyPatchType, []byte(status), metav1.PatchOptions{FieldManager: "e2e"}, "status")
	if err != nil || len(withStatus.Status.Conditions) != 1 || withStatus.Status.Conditions[0].Reason != "TestReason" {
		t.Fatalf("apply status = %+v, %v", withStatus, err)
	}
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "test.storagemigration.example.com=test"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	if err := c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "test.storagemigration.example.com=test"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if _, err := c.Get(ctx, "test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after deletecollection: err = %v, want 404", err)
	}
}
