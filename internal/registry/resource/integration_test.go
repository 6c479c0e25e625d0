package resource_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationDRA runs the resource.k8s.io/v1 objects through what upstream's DRA
// CRUD conformance specs do with them, behind a real mizzen apiserver: create, patch
// (strategic merge, JSON and apply), status updates, immutable specs, deletecollection.
func TestIntegrationDRA(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	res := cs.ResourceV1()

	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "dra.example.com", Labels: map[string]string{"e2e": "x"}},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "false"}}}}}
	if _, err := res.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
	patched, err := res.DeviceClasses().Patch(ctx, class.Name, types.StrategicMergePatchType,
		[]byte(`{"spec": {"selectors": [{"cel": {"expression": "1 == 0"}}]}}`), metav1.PatchOptions{})
	if err != nil || patched.Spec.Selectors[0].CEL.Expression != "1 == 0" || patched.Generation != 2 {
		t.Fatalf("patch DeviceClass = %+v, %v", patched, err)
	}

	claims := res.ResourceClaims("default")
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "req-0",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra.example.com"}}}}}}
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil || created.Spec.Devices.Requests[0].Exactly.Count != 1 {
		t.Fatalf("create ResourceClaim = %+v, %v", created, err)
	}
	if _, err := claims.Patch(ctx, "claim", types.ApplyPatchType, []byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"labels":{"test.dra.example.com":"test"}}}`),
		metav1.PatchOptions{FieldManager: "e2e"}); err != nil {
		t.Fatalf("apply ResourceClaim: %v", err)
	}
	st, err := claims.Patch(ctx, "claim", types.JSONPatchType, []byte(`[{"op": "add", "path": "/status/allocation", "value": {}}]`), metav1.PatchOptions{}, "status")
	if err != nil || st.Status.Allocation == nil {
		t.Fatalf("patch ResourceClaim status = %+v, %v", st, err)
	}
	respec := st.DeepCopy()
	respec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	if _, err := claims.Update(ctx, respec, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing a claim's spec: err = %v, want 422 Invalid", err)
	}

	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "dra.example.com", NodeName: ptr.To("no-such-node"), Pool: resourcev1.ResourcePool{Name: "cluster", Generation: 1, ResourceSliceCount: 1}}}
	if _, err := res.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceSlice: %v", err)
	}
	if got, err := res.ResourceSlices().Patch(ctx, "slice", types.StrategicMergePatchType, []byte(`{"spec": {"devices": [{"name": "device-0"}]}}`), metav1.PatchOptions{}); err != nil || len(got.Spec.Devices) != 1 {
		t.Fatalf("patch ResourceSlice = %+v, %v", got, err)
	}
	list, err := res.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=no-such-node"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list ResourceSlices by node = %v, %v", list, err)
	}

	rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}}}
	got, err := res.DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
	if err != nil || got.Spec.Taint.TimeAdded == nil {
		t.Fatalf("create DeviceTaintRule = %+v, %v", got, err)
	}
	got.Status.Conditions = []metav1.Condition{{Type: "Testing", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "E2E_test_running", Message: "This condition can be ignored."}}
	if got, err = res.DeviceTaintRules().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil || len(got.Status.Conditions) != 1 {
		t.Fatalf("update DeviceTaintRule status = %+v, %v", got, err)
	}

	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Labels: map[string]string{"e2e": "x"}},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claim.Spec}}
	if _, err := res.ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate: %v", err)
	}
	if err := res.ResourceClaimTemplates("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e=x"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if _, err := res.ResourceClaimTemplates("default").Get(ctx, "tmpl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after deletecollection: err = %v, want 404", err)
	}
}
