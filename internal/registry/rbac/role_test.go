package rbac

import (
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRoleNames(t *testing.T) {
	r := findResource(t, "roles")
	if got := r.ValidateName("system:controller:foo", false); len(got) != 0 {
		t.Errorf("system:controller:foo rejected: %v", got)
	}
	if got := r.ValidateName("a/b", false); !reflect.DeepEqual(got, []string{"may not contain '/'"}) {
		t.Errorf("a/b: %v", got)
	}
	if got := r.ValidateName("..", false); !reflect.DeepEqual(got, []string{"may not be '..'"}) {
		t.Errorf("..: %v", got)
	}
}

func TestRoleValidate(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		rule     rbacv1.PolicyRule
		want     []fieldErr
	}{
		{"valid", "roles", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, nil},
		{"no verbs", "roles", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}},
			[]fieldErr{{field.ErrorTypeRequired, "rules[0].verbs"}}},
		{"no api groups or resources", "roles", rbacv1.PolicyRule{Verbs: []string{"get"}},
			[]fieldErr{{field.ErrorTypeRequired, "rules[0].apiGroups"}, {field.ErrorTypeRequired, "rules[0].resources"}}},
		{"non-resource URL in a role", "roles", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
			[]fieldErr{{field.ErrorTypeInvalid, "rules[0].nonResourceURLs"}}},
		{"non-resource URL in a cluster role", "clusterroles", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, nil},
		{"non-resource URL with resources", "clusterroles", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, Resources: []string{"pods"}},
			[]fieldErr{{field.ErrorTypeInvalid, "rules[0].nonResourceURLs"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := findResource(t, tt.resource)
			obj := r.New()
			switch o := obj.(type) {
			case *rbacv1.Role:
				o.Rules = []rbacv1.PolicyRule{tt.rule}
			case *rbacv1.ClusterRole:
				o.Rules = []rbacv1.PolicyRule{tt.rule}
			}
			r.Strategy.Default(obj)
			assertErrs(t, r.Strategy.Validate(ctx, obj), tt.want)
		})
	}
}

func TestClusterRoleAggregation(t *testing.T) {
	r := findResource(t, "clusterroles")
	role := &rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{}}
	assertErrs(t, r.Strategy.Validate(ctx, role), []fieldErr{{field.ErrorTypeRequired, "aggregationRule.clusterRoleSelectors"}})
	role.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.example.com/aggregate-to-edit": "true"}}}
	assertErrs(t, r.Strategy.Validate(ctx, role), nil)
}

func TestRolePrint(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600)))
	for _, resource := range []string{"roles", "clusterroles"} {
		r := findResource(t, resource)
		assertColumns(t, r, "Name", "Created At")
		obj := r.New()
		m := obj.(metav1.Object)
		m.SetName("admin")
		m.SetCreationTimestamp(created)
		if got, want := r.Printer.Row(obj), []interface{}{"admin", "2026-03-04T04:06:07Z"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s row = %#v, want %#v", resource, got, want)
		}
	}
}
