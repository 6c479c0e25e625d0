package rbac

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestBindingDefault(t *testing.T) {
	r := findResource(t, "rolebindings")
	rb := &rbacv1.RoleBinding{
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}},
	}
	r.Strategy.Default(rb)
	if rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" {
		t.Errorf("roleRef.apiGroup = %q", rb.RoleRef.APIGroup)
	}
	got := []string{rb.Subjects[0].APIGroup, rb.Subjects[1].APIGroup, rb.Subjects[2].APIGroup}
	if want := []string{"rbac.authorization.k8s.io", "rbac.authorization.k8s.io", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("subject apiGroups = %q, want %q", got, want)
	}
}

func TestBindingValidate(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		want     []fieldErr
	}{
		{"valid", "rolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"}, []rbacv1.Subject{{Kind: "User", Name: "alice"}}, nil},
		{"cluster binding to a Role", "clusterrolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"}, nil,
			[]fieldErr{{field.ErrorTypeNotSupported, "roleRef.kind"}}},
		{"wrong role group", "rolebindings", rbacv1.RoleRef{APIGroup: "example.com", Kind: "Role", Name: "view"}, nil,
			[]fieldErr{{field.ErrorTypeNotSupported, "roleRef.apiGroup"}}},
		{"missing role name", "rolebindings", rbacv1.RoleRef{Kind: "ClusterRole"}, nil,
			[]fieldErr{{field.ErrorTypeRequired, "roleRef.name"}}},
		{"subject without name", "rolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"}, []rbacv1.Subject{{Kind: "User"}},
			[]fieldErr{{field.ErrorTypeRequired, "subjects[0].name"}}},
		{"unknown subject kind", "rolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"}, []rbacv1.Subject{{Kind: "Robot", Name: "r2"}},
			[]fieldErr{{field.ErrorTypeNotSupported, "subjects[0].kind"}}},
		{"service account needs a namespace in a cluster binding", "clusterrolebindings", rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			[]rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}, []fieldErr{{field.ErrorTypeRequired, "subjects[0].namespace"}}},
		{"service account in a role binding may omit namespace", "rolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"},
			[]rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa"}}, nil},
		{"service account with a group", "rolebindings", rbacv1.RoleRef{Kind: "Role", Name: "view"},
			[]rbacv1.Subject{{Kind: "ServiceAccount", APIGroup: "rbac.authorization.k8s.io", Name: "sa"}},
			[]fieldErr{{field.ErrorTypeNotSupported, "subjects[0].apiGroup"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := findResource(t, tt.resource)
			obj := r.New()
			switch o := obj.(type) {
			case *rbacv1.RoleBinding:
				o.RoleRef, o.Subjects = tt.ref, tt.subjects
			case *rbacv1.ClusterRoleBinding:
				o.RoleRef, o.Subjects = tt.ref, tt.subjects
			}
			r.Strategy.Default(obj)
			assertErrs(t, r.Strategy.Validate(ctx, obj), tt.want)
		})
	}
}

func TestBindingRoleRefImmutable(t *testing.T) {
	r := findResource(t, "clusterrolebindings")
	old := &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"}}
	updated := old.DeepCopy()
	updated.RoleRef.Name = "admin"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), []fieldErr{{field.ErrorTypeInvalid, "roleRef"}})
	updated.RoleRef.Name = "view"
	updated.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "bob"}}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)
}

func TestBindingPrint(t *testing.T) {
	for _, resource := range []string{"rolebindings", "clusterrolebindings"} {
		r := findResource(t, resource)
		assertColumns(t, r, "Name", "Role", "Age", "Users", "Groups", "ServiceAccounts")
		obj := r.New()
		subjects := []rbacv1.Subject{
			{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"},
			{Kind: "ServiceAccount", Namespace: "kube-system", Name: "builder"},
		}
		meta := metav1.ObjectMeta{Name: "b", CreationTimestamp: threeDaysAgo}
		switch o := obj.(type) {
		case *rbacv1.RoleBinding:
			o.ObjectMeta, o.RoleRef, o.Subjects = meta, rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, subjects
		case *rbacv1.ClusterRoleBinding:
			o.ObjectMeta, o.RoleRef, o.Subjects = meta, rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, subjects
		}
		want := []interface{}{"b", "ClusterRole/edit", "3d", "alice, bob", "devs", "kube-system/builder"}
		if got := r.Printer.Row(obj); !reflect.DeepEqual(got, want) {
			t.Errorf("%s row = %#v, want %#v", resource, got, want)
		}
		if r.Printer.Columns[3].Priority != 1 || r.Printer.Columns[1].Priority != 0 {
			t.Errorf("%s: only the subject columns are wide", resource)
		}
	}
}
