package clusterroleaggregation

import (
	"context"
	"encoding/json"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func role(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggregated(name string, selectors ...map[string]string) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, AggregationRule: &rbacv1.AggregationRule{}}
	for _, s := range selectors {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return r
}

var (
	getPods   = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	listNodes = rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"nodes"}}
	watchAll  = rbacv1.PolicyRule{Verbs: []string{"watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}}
)

// sync's writes for one aggregated role, given the observed roles.
func TestSync(t *testing.T) {
	toView := map[string]string{"aggregate-to-view": "true"}
	toEdit := map[string]string{"aggregate-to-edit": "true"}
	tests := []struct {
		name      string
		roles     []runtime.Object
		key       string
		wantRules []rbacv1.PolicyRule // nil: no write
		wantWrite bool
	}{
		{"rules of matching roles, in name order, without duplicates", []runtime.Object{
			aggregated("view", toView),
			role("b-nodes", toView, listNodes, getPods),
			role("a-pods", toView, getPods),
			role("unlabelled", nil, watchAll),
		}, "view", []rbacv1.PolicyRule{getPods, listNodes}, true},
		{"several selectors", []runtime.Object{
			aggregated("edit", toView, toEdit),
			role("v", toView, getPods),
			role("e", toEdit, watchAll),
		}, "edit", []rbacv1.PolicyRule{watchAll, getPods}, true},
		{"already aggregated: no write", []runtime.Object{
			func() runtime.Object {
				r := aggregated("view", toView)
				r.Rules = []rbacv1.PolicyRule{getPods}
				return r
			}(),
			role("a-pods", toView, getPods),
		}, "view", nil, false},
		{"rules of a role that lost its label leave", []runtime.Object{
			func() runtime.Object {
				r := aggregated("view", toView)
				r.Rules = []rbacv1.PolicyRule{getPods, listNodes}
				return r
			}(),
			role("a-pods", toView, getPods),
			role("b-nodes", nil, listNodes),
		}, "view", []rbacv1.PolicyRule{getPods}, true},
		{"a role without aggregation rule is left alone", []runtime.Object{
			role("plain", toView, getPods),
		}, "plain", nil, false},
		{"a role that matches itself does not take its own rules", []runtime.Object{
			func() runtime.Object { r := aggregated("self", toView); r.Labels = toView; return r }(),
			role("a-pods", toView, getPods),
		}, "self", []rbacv1.PolicyRule{getPods}, true},
		{"a deleted role", nil, "gone", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(tt.roles...)
			factory := informers.NewSharedInformerFactory(client, 0)
			c := New(client, factory.Rbac().V1().ClusterRoles())
			ctx := context.Background()
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			client.ClearActions()
			if err := c.sync(ctx, tt.key); err != nil {
				t.Fatal(err)
			}
			var updates []*rbacv1.ClusterRole
			for _, a := range client.Actions() {
				if u, ok := a.(k8stesting.UpdateAction); ok {
					updates = append(updates, u.GetObject().(*rbacv1.ClusterRole))
				}
			}
			if !tt.wantWrite {
				if len(updates) != 0 {
					t.Fatalf("wrote %v, want no write", updates)
				}
				return
			}
			if len(updates) != 1 || updates[0].Name != tt.key {
				t.Fatalf("updates %v, want one of %s", updates, tt.key)
			}
			got, _ := json.Marshal(updates[0].Rules)
			want, _ := json.Marshal(tt.wantRules)
			if string(got) != string(want) {
				t.Errorf("rules %s, want %s", got, want)
			}
		})
	}
}
