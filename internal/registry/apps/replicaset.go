package apps

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// ReplicaSets describes apps/v1 replicasets.
func ReplicaSets() *registry.Resource {
	return &registry.Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "replicasets",
		Kind:         "ReplicaSet",
		SingularName: "replicaset",
		Namespaced:   true,
		ShortNames:   []string{"rs"},
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:      func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Strategy:     replicaSetStrategy{},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(obj.(*appsv1.ReplicaSet).Status.Replicas))}
		},
		Printer:   replicaSetPrinter(),
		HasStatus: true,
		Scale: &registry.ScaleAdapter{
			Get: func(obj runtime.Object) (int32, int32, string) {
				rs := obj.(*appsv1.ReplicaSet)
				return replicas(rs.Spec.Replicas), rs.Status.Replicas, scaleSelector(rs.Spec.Selector)
			},
			Set: func(obj runtime.Object, n int32) { obj.(*appsv1.ReplicaSet).Spec.Replicas = &n },
		},
	}
}

type replicaSetStrategy struct{ registry.BaseStrategy }

func (replicaSetStrategy) Default(obj runtime.Object) {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr(int32(1))
	}
	core.DefaultPodSpec(&rs.Spec.Template.Spec)
}

func (replicaSetStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*appsv1.ReplicaSet).Status = appsv1.ReplicaSetStatus{}
}

func (replicaSetStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateReplicaSetSpec(&obj.(*appsv1.ReplicaSet).Spec, field.NewPath("spec"))
}

func (replicaSetStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	rs, oldRS := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
	allErrs := validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(rs.Spec.Selector, oldRS.Spec.Selector, field.NewPath("spec", "selector"))...)
	return append(allErrs, validateReplicaSetStatus(&rs.Status, &oldRS.Status)...)
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateNonnegative(replicas(spec.Replicas), fldPath.Child("replicas"))
	allErrs = append(allErrs, validateNonnegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateRequiredSelector(spec.Selector, "replicaset", fldPath.Child("selector"))...)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("selector"), spec.Selector, "invalid label selector"))
	} else {
		allErrs = append(allErrs, validateReplicatedTemplate(&spec.Template, sel, "ReplicaSet", fldPath.Child("template"))...)
	}
	return allErrs
}

func replicaSetPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Desired", Type: "integer", Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
			{Name: "Current", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
			{Name: "Ready", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []interface{} {
			rs := obj.(*appsv1.ReplicaSet)
			names, images := containerCells(rs.Spec.Template.Spec.Containers)
			return []interface{}{rs.Name, int64(replicas(rs.Spec.Replicas)), int64(rs.Status.Replicas),
				int64(rs.Status.ReadyReplicas), registry.Age(rs.CreationTimestamp),
				names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}
		},
	}
}

// ValidateStatusUpdate checks a write through the status subresource: the status
// only, as upstream's status strategy (the spec is the stored one).
func (replicaSetStrategy) ValidateStatusUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateReplicaSetStatus(&obj.(*appsv1.ReplicaSet).Status, &old.(*appsv1.ReplicaSet).Status)
}
