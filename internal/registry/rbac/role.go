package rbac

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func roles() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "roles",
		Kind:         "Role",
		SingularName: "role",
		Namespaced:   true,
		ValidateName: validateName,
		New:          func() runtime.Object { return &rbacv1.Role{} },
		NewList:      func() runtime.Object { return &rbacv1.RoleList{} },
		Strategy:     roleStrategy{},
		Printer:      createdAtPrinter,
	}
}

func clusterRoles() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "clusterroles",
		Kind:         "ClusterRole",
		SingularName: "clusterrole",
		ValidateName: validateName,
		New:          func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList:      func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		Strategy:     clusterRoleStrategy{},
		Printer:      createdAtPrinter,
	}
}

type roleStrategy struct{ registry.BaseStrategy }

func (roleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateRules(obj.(*rbacv1.Role).Rules, true)
}

func (s roleStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

type clusterRoleStrategy struct{ registry.BaseStrategy }

func (clusterRoleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	role := obj.(*rbacv1.ClusterRole)
	allErrs := validateRules(role.Rules, false)
	if agg := role.AggregationRule; agg != nil {
		selectorsPath := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(agg.ClusterRoleSelectors) == 0 {
			allErrs = append(allErrs, field.Required(selectorsPath, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range agg.ClusterRoleSelectors {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(&agg.ClusterRoleSelectors[i],
				metav1validation.LabelSelectorValidationOptions{}, selectorsPath.Index(i))...)
		}
	}
	return allErrs
}

func (s clusterRoleStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var allErrs field.ErrorList
	for i, rule := range rules {
		allErrs = append(allErrs, validatePolicyRule(rule, namespaced, field.NewPath("rules").Index(i))...)
	}
	return allErrs
}

func validatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Verbs) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return allErrs
	}
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	}
	return allErrs
}
