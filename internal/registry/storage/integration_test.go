package storage_test

import (
	"context"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationVolumeAttributesClass runs a VolumeAttributesClass through the life a
// client gives it (as upstream's conformance spec does) behind a real mizzen apiserver.
func TestIntegrationVolumeAttributesClass(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t)).StorageV1().VolumeAttributesClasses()
	ctx := context.Background()
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold", Labels: map[string]string{"tier": "gold"}},
		DriverName: "csi.example.com", Parameters: map[string]string{"iops": "5000"}}
	if _, err := c.Create(ctx, vac, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := c.Get(ctx, "gold", metav1.GetOptions{})
	if err != nil || got.DriverName != "csi.example.com" || got.Parameters["iops"] != "5000" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	patched, err := c.Patch(ctx, "gold", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"gold":"patched"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["gold"] != "patched" {
		t.Fatalf("patch = %v, %v", patched.Labels, err)
	}
	patched.Parameters = map[string]string{"iops": "9000"}
	if _, err := c.Update(ctx, patched, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("updating parameters: err = %v, want 422 Invalid", err)
	}
	bad := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, DriverName: "csi.example.com"}
	if _, err := c.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("creating without parameters: err = %v, want 422 Invalid", err)
	}
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "tier=gold"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	if err := c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "tier=gold"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if _, err := c.Get(ctx, "gold", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after deletecollection: err = %v, want 404", err)
	}
}
