package apps

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// ControllerRevisions describes apps/v1 controllerrevisions, the immutable snapshots of
// pod templates that daemonsets and statefulsets keep for rollbacks.
func ControllerRevisions() *registry.Resource {
	return &registry.Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "controllerrevisions",
		Kind:         "ControllerRevision",
		SingularName: "controllerrevision",
		Namespaced:   true,
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:      func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Strategy:     controllerRevisionStrategy{},
		Printer:      controllerRevisionPrinter(),
	}
}

type controllerRevisionStrategy struct{ registry.BaseStrategy }

func (controllerRevisionStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	cr := obj.(*appsv1.ControllerRevision)
	var allErrs field.ErrorList
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(allErrs, apivalidation.ValidateNonnegativeField(cr.Revision, field.NewPath("revision"))...)
}

// ValidateUpdate keeps data immutable: a revision is a snapshot.
func (s controllerRevisionStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	cr, oldCR := obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
	allErrs := s.Validate(ctx, obj)
	return append(allErrs, apivalidation.ValidateImmutableField(cr.Data, oldCR.Data, field.NewPath("data"))...)
}

func controllerRevisionPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Controller", Type: "string", Description: "Controller of the object"},
			{Name: "Revision", Type: "string", Description: appsv1beta1.ControllerRevision{}.SwaggerDoc()["revision"]},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []interface{} {
			cr := obj.(*appsv1.ControllerRevision)
			controller := "<none>"
			if ref := metav1.GetControllerOf(cr); ref != nil {
				controller = ref.Name
				if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
					if gk := gv.WithKind(ref.Kind).GroupKind(); !gk.Empty() {
						controller = strings.ToLower(gk.String()) + "/" + ref.Name
					}
				}
			}
			return []interface{}{cr.Name, controller, cr.Revision, registry.Age(cr.CreationTimestamp)}
		},
	}
}
