// Package storagemigration describes storagemigration.k8s.io/v1 storageversionmigrations:
// a request to rewrite every stored object of one resource at the current storage version.
//
// mizzen serves and validates the API as upstream does. It keeps one stored version per
// resource, so a migration has nothing to convert; the controller that would rewrite the
// objects and report Running/Succeeded is not implemented (CONFORMANCE.md says so), and
// migrations stay without conditions.
package storagemigration

import (
	"context"

	svmv1 "k8s.io/api/storagemigration/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the storagemigration.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{{
		GroupVersion: svmv1.SchemeGroupVersion,
		Resource:     "storageversionmigrations",
		Kind:         "StorageVersionMigration",
		SingularName: "storageversionmigration",
		HasStatus:    true,
		New:          func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		NewList:      func() runtime.Object { return &svmv1.StorageVersionMigrationList{} },
		Strategy:     strategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Resource", Type: "string", Description: svmv1.StorageVersionMigrationSpec{}.SwaggerDoc()["resource"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				m := obj.(*svmv1.StorageVersionMigration)
				return []interface{}{m.Name, m.Spec.Resource.String(), registry.Age(m.CreationTimestamp)}
			},
		},
	}}
}

type strategy struct{ registry.BaseStrategy }

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	m := obj.(*svmv1.StorageVersionMigration)
	var allErrs field.ErrorList
	if m.Spec.Resource.Resource == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("spec", "resource", "resource"), "resource is required"))
	}
	return append(allErrs, validateStatus(&m.Status)...)
}

// ValidateUpdate: the resource to migrate is fixed, and so is the resourceVersion the
// migration started from once recorded.
func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	m, oldM := obj.(*svmv1.StorageVersionMigration), old.(*svmv1.StorageVersionMigration)
	allErrs := apimachineryvalidation.ValidateImmutableField(m.Spec, oldM.Spec, field.NewPath("spec"))
	if oldM.Status.ResourceVersion != "" {
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(m.Status.ResourceVersion, oldM.Status.ResourceVersion,
			field.NewPath("status", "resourceVersion"))...)
	}
	return append(allErrs, validateStatus(&m.Status)...)
}

func validateStatus(s *svmv1.StorageVersionMigrationStatus) field.ErrorList {
	return metav1validation.ValidateConditions(s.Conditions, field.NewPath("status", "conditions"))
}
