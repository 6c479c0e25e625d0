package coordination

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestLeaseValidate(t *testing.T) {
	r := findResource(t, "leases")
	if !r.Namespaced || r.Kind != "Lease" {
		t.Errorf("identity = %+v", r)
	}
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []fieldErr
	}{
		{"valid", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40)}, nil},
		{"zero duration", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](0)},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.leaseDurationSeconds"}}},
		{"negative transitions", coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](-1)},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.leaseTransitions"}}},
		{"preferred holder without strategy", coordinationv1.LeaseSpec{PreferredHolder: ptr.To("node-2")},
			[]fieldErr{{field.ErrorTypeForbidden, "spec.preferredHolder"}}},
		{"preferred holder with strategy", coordinationv1.LeaseSpec{PreferredHolder: ptr.To("node-2"),
			Strategy: ptr.To(coordinationv1.OldestEmulationVersion)}, nil},
		// upstream reports strategy problems one level below the field
		{"malformed strategy", coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("a/b/c"))},
			[]fieldErr{{field.ErrorTypeInvalid, "spec.strategy.strategy"}}},
		{"unknown built-in strategy", coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("Newest"))},
			[]fieldErr{{field.ErrorTypeNotSupported, "spec.strategy.strategy"}}},
		{"custom strategy", coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("example.com/fastest"))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "kube-node-lease"}, Spec: tt.spec}
			r.Strategy.Default(lease)
			assertErrs(t, r.Strategy.Validate(ctx, lease), tt.want)
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, lease, lease), tt.want)
		})
	}
}

func TestLeasePrint(t *testing.T) {
	r := findResource(t, "leases")
	assertColumns(t, r, "Name", "Holder", "Age")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", CreationTimestamp: threeDaysAgo}}
	if got, want := r.Printer.Row(lease), []interface{}{"kube-scheduler", "", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	lease.Spec.HolderIdentity = ptr.To("host-1_3f2a")
	if got, want := r.Printer.Row(lease), []interface{}{"kube-scheduler", "host-1_3f2a", "3d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
