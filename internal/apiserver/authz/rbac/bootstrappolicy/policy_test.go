package bootstrappolicy

import (
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// roundTrip is obj as stored and read back.
func roundTrip(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.DeepCopyObject()
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A cluster started again changes nothing: every default, as stored, is already
// reconciled.
func TestDefaultsReconcileToThemselves(t *testing.T) {
	for _, item := range Items() {
		stored := roundTrip(t, item.Desired)
		if _, changed := item.Reconcile(stored); changed {
			t.Errorf("%s reconciles to a change against itself", item.Desired.(metav1.Object).GetName())
		}
	}
}

func TestDefaultsAreLabelledAndBound(t *testing.T) {
	roles := map[string]bool{}
	for _, r := range append(append(append(ClusterRoles(), AddonClusterRoles()...), joinClusterRoles()...), ControllerClusterRoles()...) {
		roles[r.Name] = true
		if r.Labels[BootstrapLabel] != "rbac-defaults" || r.Annotations[AutoUpdateAnnotation] != "true" {
			t.Errorf("%s: labels %v annotations %v", r.Name, r.Labels, r.Annotations)
		}
	}
	for _, b := range append(append(append(ClusterRoleBindings(), AddonClusterRoleBindings()...), joinClusterRoleBindings()...), ControllerClusterRoleBindings()...) {
		if !roles[b.RoleRef.Name] {
			t.Errorf("binding %s refers to %s, which is no default role", b.Name, b.RoleRef.Name)
		}
		if len(b.Subjects) == 0 && b.Name != "system:node" { // upstream's system:node binding names nobody
			t.Errorf("binding %s has no subjects", b.Name)
		}
	}
	namespaced := map[string]bool{}
	for _, r := range append(append(Roles(), joinRoles()...), controllerRoles()...) {
		namespaced[r.Namespace+"/"+r.Name] = true
	}
	for _, b := range append(append(RoleBindings(), joinRoleBindings()...), controllerRoleBindings()...) {
		if !namespaced[b.Namespace+"/"+b.RoleRef.Name] || len(b.Subjects) == 0 {
			t.Errorf("binding %s/%s refers to no default role of its namespace, or names nobody", b.Namespace, b.Name)
		}
	}
}

func TestReconcileClusterRole(t *testing.T) {
	pods := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	nodes := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"nodes"}}
	star := rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}
	desired := clusterRole("r", []rbacv1.PolicyRule{pods, nodes})
	tests := []struct {
		name        string
		existing    rbacv1.ClusterRole
		wantChanged bool
		wantRules   []rbacv1.PolicyRule
		wantLabels  string
	}{
		{"missing rule added back", rbacv1.ClusterRole{ObjectMeta: objectMeta("r"), Rules: []rbacv1.PolicyRule{pods}}, true, []rbacv1.PolicyRule{pods, nodes}, "kubernetes.io/bootstrapping=rbac-defaults"},
		{"user's extra rules kept", rbacv1.ClusterRole{ObjectMeta: objectMeta("r"), Rules: []rbacv1.PolicyRule{star}}, false, []rbacv1.PolicyRule{star}, "kubernetes.io/bootstrapping=rbac-defaults"},
		{"labels added back, others kept", rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"team": "x"}}, Rules: []rbacv1.PolicyRule{pods, nodes}}, true,
			[]rbacv1.PolicyRule{pods, nodes}, "kubernetes.io/bootstrapping=rbac-defaults,team=x"},
		{"autoupdate false left alone", rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{AutoUpdateAnnotation: "false"}}}, false, nil, ""},
	}
	for _, tt := range tests {
		got, changed := ReconcileClusterRole(tt.existing.DeepCopy(), &desired)
		if changed != tt.wantChanged {
			t.Errorf("%s: changed = %v", tt.name, changed)
		}
		if gotRules, _ := json.Marshal(got.Rules); string(gotRules) != string(must(json.Marshal(tt.wantRules))) {
			t.Errorf("%s: rules %s", tt.name, gotRules)
		}
		if l := labelString(got.Labels); l != tt.wantLabels {
			t.Errorf("%s: labels %q, want %q", tt.name, l, tt.wantLabels)
		}
	}
}

func TestReconcileClusterRoleBinding(t *testing.T) {
	desired := clusterRoleBinding("r", subjects(rbacv1.GroupKind, "a", "b"))
	existing := clusterRoleBinding("r", append(subjects(rbacv1.UserKind, "someone"), subjects(rbacv1.GroupKind, "b")...))
	got, changed := ReconcileClusterRoleBinding(existing.DeepCopy(), &desired)
	if !changed || subjectNames(got.Subjects) != "User/someone Group/b Group/a" {
		t.Errorf("changed %v, subjects %s", changed, subjectNames(got.Subjects))
	}
	other := existing.DeepCopy()
	other.RoleRef.Name = "other"
	if _, changed := ReconcileClusterRoleBinding(other, &desired); changed {
		t.Errorf("a binding to another role was changed")
	}
	frozen := existing.DeepCopy()
	frozen.Annotations[AutoUpdateAnnotation] = "false"
	if _, changed := ReconcileClusterRoleBinding(frozen, &desired); changed {
		t.Errorf("autoupdate=false binding was changed")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func labelString(l map[string]string) string {
	var parts []string
	for _, k := range []string{"kubernetes.io/bootstrapping", "team"} {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

func subjectNames(s []rbacv1.Subject) string {
	var parts []string
	for _, x := range s {
		parts = append(parts, x.Kind+"/"+x.Name)
	}
	return strings.Join(parts, " ")
}
