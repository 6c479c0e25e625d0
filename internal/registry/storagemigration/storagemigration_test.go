package storagemigration

import (
	"reflect"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestStorageVersionMigration(t *testing.T) {
	r := findResource(t, "storageversionmigrations")
	if !r.HasStatus || r.Namespaced {
		t.Errorf("identity = %+v", r)
	}
	m := &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", CreationTimestamp: threeDaysAgo},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}
	assertErrs(t, r.Strategy.Validate(ctx, m), nil)
	assertErrs(t, r.Strategy.Validate(ctx, &svmv1.StorageVersionMigration{}), []fieldErr{{field.ErrorTypeRequired, "spec.resource.resource"}})

	labelled := m.DeepCopy()
	labelled.Labels = map[string]string{"test": "yes"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, labelled, m), nil)
	moved := m.DeepCopy()
	moved.Spec.Resource.Resource = "replicasets"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, moved, m), []fieldErr{{field.ErrorTypeInvalid, "spec"}})

	started := m.DeepCopy()
	started.Status.ResourceVersion = "42"
	started.Status.Conditions = []metav1.Condition{{Type: "Running", Status: metav1.ConditionTrue, Reason: "Started", LastTransitionTime: threeDaysAgo}}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, started, m), nil)
	rewound := started.DeepCopy()
	rewound.Status.ResourceVersion = "7"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, rewound, started), []fieldErr{{field.ErrorTypeInvalid, "status.resourceVersion"}})
	noReason := started.DeepCopy()
	noReason.Status.Conditions[0].Reason = ""
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, noReason, started), []fieldErr{{field.ErrorTypeRequired, "status.conditions[0].reason"}})

	assertColumns(t, r, "Name", "Resource", "Age")
	if got, want := r.Printer.Row(m), []interface{}{"m", "deployments.apps", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
