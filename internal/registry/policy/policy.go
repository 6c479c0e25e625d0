// Package policy describes the policy/v1 resources for the apiserver:
// poddisruptionbudgets, with their validation and printing.
package policy

import (
	"context"
	"fmt"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the policy/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{PodDisruptionBudgets()}
}

// PodDisruptionBudgets describes policy/v1 poddisruptionbudgets. policy/v1 has no
// defaults for them; the spec stays mutable after create.
func PodDisruptionBudgets() *registry.Resource {
	return &registry.Resource{
		GroupVersion:    policyv1.SchemeGroupVersion,
		Resource:        "poddisruptionbudgets",
		Kind:            "PodDisruptionBudget",
		SingularName:    "poddisruptionbudget",
		Namespaced:      true,
		ShortNames:      []string{"pdb"},
		ValidateName:    apivalidation.NameIsDNSSubdomain,
		New:             func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:         func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Strategy:        pdbStrategy{},
		Printer:         pdbPrinter(),
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
	}
}

type pdbStrategy struct{ registry.BaseStrategy }

// PrepareForCreate clears the status: the disruption controller computes it.
func (pdbStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*policyv1.PodDisruptionBudget).Status = policyv1.PodDisruptionBudgetStatus{}
}

func (pdbStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
}

func (pdbStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	pdb, oldPDB := obj.(*policyv1.PodDisruptionBudget), old.(*policyv1.PodDisruptionBudget)
	allErrs := validateSpec(&pdb.Spec, field.NewPath("spec"))
	return append(allErrs, validateStatus(&pdb.Status, &oldPDB.Status)...)
}

// validateStatus checks a changed status, as the disruption controller writes it.
func validateStatus(s, old *policyv1.PodDisruptionBudgetStatus) field.ErrorList {
	if apiequality.Semantic.DeepEqual(s, old) {
		return nil
	}
	p := field.NewPath("status")
	var allErrs field.ErrorList
	for _, c := range []struct {
		name  string
		value int32
	}{{"disruptionsAllowed", s.DisruptionsAllowed}, {"currentHealthy", s.CurrentHealthy}, {"desiredHealthy", s.DesiredHealthy}, {"expectedPods", s.ExpectedPods}} {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(c.value), p.Child(c.name))...)
	}
	return append(allErrs, metavalidation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
}

var evictionPolicies = []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}

func validateSpec(spec *policyv1.PodDisruptionBudgetSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, *spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	allErrs = append(allErrs, validateIntOrPercent(spec.MinAvailable, fldPath.Child("minAvailable"))...)
	allErrs = append(allErrs, validateIntOrPercent(spec.MaxUnavailable, fldPath.Child("maxUnavailable"))...)
	allErrs = append(allErrs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p, evictionPolicies))
	}
	return allErrs
}

// validateIntOrPercent checks a non-negative integer or a percentage of at most 100%.
func validateIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, *v, msg))
		}
		var n int
		if _, err := fmt.Sscanf(strings.TrimSuffix(v.StrVal, "%"), "%d", &n); err == nil && strings.HasSuffix(v.StrVal, "%") && n > 100 {
			allErrs = append(allErrs, field.Invalid(fldPath, *v, "must not be greater than 100%"))
		}
	case intstr.Int:
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)...)
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, *v, "must be an integer or percentage (e.g '5%')"))
	}
	return allErrs
}

func pdbPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
			{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
			{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []interface{} {
			pdb := obj.(*policyv1.PodDisruptionBudget)
			orNA := func(v *intstr.IntOrString) string {
				if v == nil {
					return "N/A"
				}
				return v.String()
			}
			return []interface{}{pdb.Name, orNA(pdb.Spec.MinAvailable), orNA(pdb.Spec.MaxUnavailable),
				int64(pdb.Status.DisruptionsAllowed), registry.Age(pdb.CreationTimestamp)}
		},
	}
}
