// Package coordination describes the coordination.k8s.io/v1 leases resource, which
// leader election and node heartbeats are built on.
package coordination

import (
	"context"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the coordination.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{{
		GroupVersion: coordinationv1.SchemeGroupVersion,
		Resource:     "leases",
		Kind:         "Lease",
		SingularName: "lease",
		Namespaced:   true,
		New:          func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:      func() runtime.Object { return &coordinationv1.LeaseList{} },
		Strategy:     leaseStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				lease := obj.(*coordinationv1.Lease)
				holder := ""
				if lease.Spec.HolderIdentity != nil {
					holder = *lease.Spec.HolderIdentity
				}
				return []interface{}{lease.Name, holder, registry.Age(lease.CreationTimestamp)}
			},
		},
	}}
}

type leaseStrategy struct{ registry.BaseStrategy }

func (leaseStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateLeaseSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

func (leaseStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateLeaseSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		allErrs = append(allErrs, validateStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return allErrs
}

// validateStrategy accepts a Kubernetes-defined strategy, or a custom one named
// "<domain>/<name>". Upstream reports problems at "<path>.strategy" below the
// strategy's own path, and so does this.
func validateStrategy(strategy coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if !strings.Contains(string(strategy), "/") {
		if strategy != coordinationv1.OldestEmulationVersion {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("strategy"), strategy, []string{string(coordinationv1.OldestEmulationVersion)}))
		}
		return allErrs
	}
	for _, msg := range validation.IsQualifiedName(string(strategy)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("strategy"), strategy, msg))
	}
	return allErrs
}
