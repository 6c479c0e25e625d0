package scheduling

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestSystemPriorityClasses(t *testing.T) {
	r := findResource(t, "priorityclasses")
	got := map[string]int32{}
	for _, pc := range SystemPriorityClasses() {
		got[pc.Name] = pc.Value
		if pc.Description == "" {
			t.Errorf("%s has no description", pc.Name)
		}
		// The server creates them through the normal write path, so they must pass it.
		r.Strategy.Default(pc)
		assertErrs(t, r.Strategy.Validate(ctx, pc), nil)
		if ptr.Deref(pc.PreemptionPolicy, "") != corev1.PreemptLowerPriority {
			t.Errorf("%s preemptionPolicy = %v", pc.Name, pc.PreemptionPolicy)
		}
	}
	want := map[string]int32{"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("system classes = %v, want %v", got, want)
	}
}

func TestPriorityClassValidate(t *testing.T) {
	r := findResource(t, "priorityclasses")
	if !reflect.DeepEqual(r.ShortNames, []string{"pc"}) || r.Namespaced {
		t.Errorf("identity = %+v", r)
	}
	tests := []struct {
		name    string
		pc      schedulingv1.PriorityClass
		want    []fieldErr
		message string // a fragment of the first error's detail
	}{
		{"valid", schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, nil, ""},
		{"value above user maximum", schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Value: 1000000001},
			[]fieldErr{{field.ErrorTypeForbidden, "value"}}, "maximum allowed value of a user defined priority is 1000000000"},
		{"reserved name", schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 10},
			[]fieldErr{{field.ErrorTypeForbidden, "metadata.name"}}, "system-mine is not a known system priority class"},
		{"system class with wrong value", schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 10},
			[]fieldErr{{field.ErrorTypeForbidden, "metadata.name"}}, "value of system-node-critical PriorityClass must be 2000001000"},
		{"bad preemption policy", schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "p"}, PreemptionPolicy: ptr.To(corev1.PreemptionPolicy("Always"))},
			[]fieldErr{{field.ErrorTypeNotSupported, "preemptionPolicy"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := tt.pc.DeepCopy()
			r.Strategy.Default(pc)
			errs := r.Strategy.Validate(ctx, pc)
			assertErrs(t, errs, tt.want)
			if tt.message != "" && len(errs) > 0 && !strings.Contains(errs[0].Detail, tt.message) {
				t.Errorf("detail = %q, want it to contain %q", errs[0].Detail, tt.message)
			}
		})
	}
}

func TestPriorityClassUpdate(t *testing.T) {
	r := findResource(t, "priorityclasses")
	old := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	r.Strategy.Default(old)
	value := old.DeepCopy()
	value.Value = 2000
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, value, old), []fieldErr{{field.ErrorTypeForbidden, "value"}})
	policy := old.DeepCopy()
	policy.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, policy, old), []fieldErr{{field.ErrorTypeInvalid, "preemptionPolicy"}})
	description := old.DeepCopy()
	description.Description = "now documented"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, description, old), nil)
}

func TestPriorityClassPrint(t *testing.T) {
	r := findResource(t, "priorityclasses")
	assertColumns(t, r, "Name", "Value", "Global-Default", "Age", "PreemptionPolicy")
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high", CreationTimestamp: threeDaysAgo},
		Value: 1000, GlobalDefault: true, PreemptionPolicy: ptr.To(corev1.PreemptNever)}
	if got, want := r.Printer.Row(pc), []interface{}{"high", int64(1000), true, "3d", "Never"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
