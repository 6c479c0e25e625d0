package flowcontrol_test

import (
	"context"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/apiserver"
)

// TestIntegrationFlowControl takes FlowSchemas and PriorityLevelConfigurations through
// what upstream's conformance specs do with them, behind a real mizzen apiserver, and
// checks the configuration every cluster starts with.
func TestIntegrationFlowControl(t *testing.T) {
	cfg := apiserver.Start(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	resources, err := cs.Discovery().ServerResourcesForGroupVersion("flowcontrol.apiserver.k8s.io/v1")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	found := map[string]bool{}
	for _, r := range resources.APIResources {
		found[r.Name] = true
	}
	for _, name := range []string{"flowschemas", "flowschemas/status", "prioritylevelconfigurations", "prioritylevelconfigurations/status"} {
		if !found[name] {
			t.Errorf("discovery lacks %s: %v", name, found)
		}
	}

	for _, name := range []string{"exempt", "catch-all", "global-default"} {
		if _, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("initial level %s: %v", name, err)
		}
		if _, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("initial schema %s: %v", name, err)
		}
	}
	catchAll, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
	if err == nil {
		catchAll.Spec.MatchingPrecedence = 5000
		if _, err := cs.FlowcontrolV1().FlowSchemas().Update(ctx, catchAll, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("changing the mandatory catch-all schema: err = %v, want 422", err)
		}
	}

	levels := cs.FlowcontrolV1().PriorityLevelConfigurations()
	const label = "e2e=levels"
	template := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-example-pl-", Labels: map[string]string{"e2e": "levels"}},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](2),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	var created *flowcontrolv1.PriorityLevelConfiguration
	for range 3 {
		if created, err = levels.Create(ctx, template, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	list, err := levels.List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("list = %v, %v", list, err)
	}
	w, err := levels.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, LabelSelector: label})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	patched, err := levels.Patch(ctx, created.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patched":"true"}},"spec":{"limited":{"nominalConcurrencyShares":4}}}`), metav1.PatchOptions{})
	if err != nil || *patched.Spec.Limited.NominalConcurrencyShares != 4 {
		t.Fatalf("patch = %v, %v", patched, err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Modified || ev.Object.(*flowcontrolv1.PriorityLevelConfiguration).Annotations["patched"] != "true" {
			t.Errorf("watch event = %s %v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second): // a bound, not a timing assertion: the event is due at once
		t.Fatal("no watch event for the patch")
	}

	status, err := dynamic.NewForConfigOrDie(cfg).Resource(flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations")).
		Get(ctx, created.Name, metav1.GetOptions{}, "status")
	if err != nil || status.GetUID() != created.UID || status.GetKind() != "PriorityLevelConfiguration" {
		t.Fatalf("get status = %v, %v", status, err)
	}
	withCondition, err := levels.Patch(ctx, created.Name, types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"PatchStatusFailed","status":"False","reason":"e2e"}]},"spec":{"limited":{"nominalConcurrencyShares":9}}}`),
		metav1.PatchOptions{}, "status")
	if err != nil || len(withCondition.Status.Conditions) != 1 || *withCondition.Spec.Limited.NominalConcurrencyShares != 4 {
		t.Fatalf("patch status (the spec must not change through it) = %+v, %v", withCondition, err)
	}

	if err := levels.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := levels.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if list, err := levels.List(ctx, metav1.ListOptions{LabelSelector: label}); err != nil || len(list.Items) != 0 {
		t.Errorf("left = %v, %v", list, err)
	}

	bad := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "no-level"},
		Spec:       flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 500},
	}
	if _, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("schema without a level: err = %v, want 422", err)
	}
}
