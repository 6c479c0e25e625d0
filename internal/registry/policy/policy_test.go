package policy

import (
	"context"
	"reflect"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestPDBIdentity(t *testing.T) {
	r := PodDisruptionBudgets()
	if r.GroupVersionResource().String() != "policy/v1, Resource=poddisruptionbudgets" || r.Kind != "PodDisruptionBudget" ||
		r.SingularName != "poddisruptionbudget" || !reflect.DeepEqual(r.ShortNames, []string{"pdb"}) || len(r.Categories) != 0 ||
		!r.HasStatus || r.Scale != nil {
		t.Errorf("identity = %+v", r)
	}
}

func TestPDBPrepareForCreate(t *testing.T) {
	p := newPDB()
	p.Status.DisruptionsAllowed = 3
	before := p.Spec.DeepCopy()
	s := PodDisruptionBudgets().Strategy
	s.Default(p)
	s.PrepareForCreate(context.Background(), p)
	if p.Status.DisruptionsAllowed != 0 || !reflect.DeepEqual(&p.Spec, before) {
		t.Errorf("pdb = %+v", p)
	}
}

type wantError struct {
	field string
	typ   field.ErrorType
}

func TestPDBValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*policyv1.PodDisruptionBudget)
		want   []wantError
	}{
		{"valid", func(*policyv1.PodDisruptionBudget) {}, nil},
		{"percent", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromString("50%")) }, nil},
		{"max unavailable", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = nil
			p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1))
		}, nil},
		{"both", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1)) },
			[]wantError{{"spec", field.ErrorTypeInvalid}}},
		{"negative", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromInt32(-1)) },
			[]wantError{{"spec.minAvailable", field.ErrorTypeInvalid}}},
		{"over 100%", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromString("120%")) },
			[]wantError{{"spec.minAvailable", field.ErrorTypeInvalid}}},
		{"not a percent", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = nil
			p.Spec.MaxUnavailable = ptr(intstr.FromString("half"))
		}, []wantError{{"spec.maxUnavailable", field.ErrorTypeInvalid}}},
		{"bad selector", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}, []wantError{{"spec.selector.matchExpressions[0].operator", field.ErrorTypeInvalid}}},
		{"eviction policy", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.UnhealthyPodEvictionPolicyType("Never"))
		}, []wantError{{"spec.unhealthyPodEvictionPolicy", field.ErrorTypeNotSupported}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPDB()
			tt.mutate(p)
			errs := PodDisruptionBudgets().Strategy.Validate(context.Background(), p)
			got := map[wantError]int{}
			for _, e := range errs {
				got[wantError{e.Field, e.Type}]++
			}
			want := map[wantError]int{}
			for _, w := range tt.want {
				want[w]++
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("errors = %v, want %v", errs, tt.want)
			}
		})
	}
	// The spec may change after create in policy/v1.
	old, changed := newPDB(), newPDB()
	changed.Spec.MinAvailable = ptr(intstr.FromString("80%"))
	changed.Spec.Selector.MatchLabels["tier"] = "front"
	if errs := PodDisruptionBudgets().Strategy.ValidateUpdate(context.Background(), changed, old); len(errs) != 0 {
		t.Errorf("update rejected: %v", errs)
	}
}

func TestPDBStatusValidation(t *testing.T) {
	old := newPDB()
	updated := newPDB()
	updated.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 3,
		Conditions: []metav1.Condition{{Type: "DisruptionAllowed", Status: "Maybe", Reason: "SufficientPods", LastTransitionTime: metav1.Now()}}}
	errs := PodDisruptionBudgets().Strategy.ValidateUpdate(context.Background(), updated, old)
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	if len(errs) != 2 || !got["status.disruptionsAllowed"] || !got["status.conditions[0].status"] {
		t.Errorf("errors = %v", errs)
	}
	// A status the update does not change is not judged again.
	if errs := PodDisruptionBudgets().Strategy.ValidateUpdate(context.Background(), updated.DeepCopy(), updated); len(errs) != 0 {
		t.Errorf("unchanged status rejected: %v", errs)
	}
}

func TestPDBPrinter(t *testing.T) {
	p := PodDisruptionBudgets().Printer
	var names []string
	for _, c := range p.Columns {
		names = append(names, c.Name)
	}
	if !reflect.DeepEqual(names, []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}) {
		t.Errorf("columns = %v", names)
	}
	pdb := newPDB()
	pdb.Status.DisruptionsAllowed = 1
	if got := p.Row(pdb)[:4]; !reflect.DeepEqual(got, []interface{}{"web", "2", "N/A", int64(1)}) {
		t.Errorf("row = %#v", got)
	}
	pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = nil, ptr(intstr.FromString("25%"))
	if got := p.Row(pdb)[:4]; !reflect.DeepEqual(got, []interface{}{"web", "N/A", "25%", int64(1)}) {
		t.Errorf("row = %#v", got)
	}
}
