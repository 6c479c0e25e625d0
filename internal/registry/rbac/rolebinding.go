package rbac

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	// upstream takes the ROLE column description from the v1beta1 docs
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func roleBindings() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "rolebindings",
		Kind:         "RoleBinding",
		SingularName: "rolebinding",
		Namespaced:   true,
		ValidateName: validateName,
		New:          func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:      func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Strategy:     bindingStrategy{clusterScoped: false},
		Printer:      bindingPrinter("roleBinding", rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]),
	}
}

func clusterRoleBindings() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "clusterrolebindings",
		Kind:         "ClusterRoleBinding",
		SingularName: "clusterrolebinding",
		ValidateName: validateName,
		New:          func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList:      func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		Strategy:     bindingStrategy{clusterScoped: true},
		Printer:      bindingPrinter("clusterRoleBinding", rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]),
	}
}

// binding returns the role reference and subjects of either kind of binding.
func binding(obj runtime.Object) (*rbacv1.RoleRef, []rbacv1.Subject) {
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		return &b.RoleRef, b.Subjects
	case *rbacv1.ClusterRoleBinding:
		return &b.RoleRef, b.Subjects
	}
	panic(fmt.Sprintf("rbac: not a binding: %T", obj))
}

// bindingStrategy serves rolebindings and clusterrolebindings, which differ only in
// the role kinds they may reference and in service account subjects needing a
// namespace.
type bindingStrategy struct {
	registry.BaseStrategy
	clusterScoped bool
}

func (bindingStrategy) Default(obj runtime.Object) {
	ref, subjects := binding(obj)
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

func (s bindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ref, subjects := binding(obj)
	var allErrs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		allErrs = append(allErrs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	validKinds := []string{"Role", "ClusterRole"}
	if s.clusterScoped {
		validKinds = []string{"ClusterRole"}
	}
	if !contains(validKinds, ref.Kind) {
		allErrs = append(allErrs, field.NotSupported(refPath.Child("kind"), ref.Kind, validKinds))
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range validateName(ref.Name, false) {
			allErrs = append(allErrs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i, subject := range subjects {
		allErrs = append(allErrs, validateSubject(subject, !s.clusterScoped, field.NewPath("subjects").Index(i))...)
	}
	return allErrs
}

func (s bindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	allErrs := s.Validate(ctx, obj)
	ref, _ := binding(obj)
	oldRef, _ := binding(old)
	if !reflect.DeepEqual(*ref, *oldRef) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("roleRef"), *ref, "cannot change roleRef"))
	}
	return allErrs
}

func validateSubject(subject rbacv1.Subject, namespaced bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if subject.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	}
	switch subject.Kind {
	case rbacv1.ServiceAccountKind:
		if subject.Name != "" {
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(subject.Name, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), subject.Name, msg))
			}
		}
		if subject.APIGroup != "" {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("apiGroup"), subject.APIGroup, []string{""}))
		}
		if !namespaced && subject.Namespace == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if subject.APIGroup != rbacv1.GroupName {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("apiGroup"), subject.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("kind"), subject.Kind,
			[]string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return allErrs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// bindingPrinter prints ROLE and AGE, and with -o wide the subjects by kind. noun is
// how upstream's column descriptions name the binding.
func bindingPrinter(noun, roleDescription string) *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Role", Type: "string", Description: roleDescription},
			registry.AgeColumn,
			{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + noun},
			{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + noun},
			{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + noun},
		},
		Row: func(obj runtime.Object) []interface{} {
			ref, subjects := binding(obj)
			m := obj.(metav1.Object)
			var users, groups, serviceAccounts []string
			for _, s := range subjects {
				switch s.Kind {
				case rbacv1.UserKind:
					users = append(users, s.Name)
				case rbacv1.GroupKind:
					groups = append(groups, s.Name)
				case rbacv1.ServiceAccountKind:
					serviceAccounts = append(serviceAccounts, s.Namespace+"/"+s.Name)
				}
			}
			return []interface{}{m.GetName(), ref.Kind + "/" + ref.Name, registry.Age(m.GetCreationTimestamp()),
				strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(serviceAccounts, ", ")}
		},
	}
}
