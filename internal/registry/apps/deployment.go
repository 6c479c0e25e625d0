package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// Deployments describes apps/v1 deployments.
func Deployments() *registry.Resource {
	return &registry.Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "deployments",
		Kind:         "Deployment",
		SingularName: "deployment",
		Namespaced:   true,
		ShortNames:   []string{"deploy"},
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &appsv1.Deployment{} },
		NewList:      func() runtime.Object { return &appsv1.DeploymentList{} },
		Strategy:     deploymentStrategy{},
		Printer:      deploymentPrinter(),
		HasStatus:    true,
		Scale: &registry.ScaleAdapter{
			Get: func(obj runtime.Object) (int32, int32, string) {
				d := obj.(*appsv1.Deployment)
				return replicas(d.Spec.Replicas), d.Status.Replicas, scaleSelector(d.Spec.Selector)
			},
			Set: func(obj runtime.Object, n int32) { obj.(*appsv1.Deployment).Spec.Replicas = &n },
		},
	}
}

type deploymentStrategy struct{ registry.BaseStrategy }

// Default applies upstream's apps/v1 deployment defaults and the pod template's.
func (deploymentStrategy) Default(obj runtime.Object) {
	d := obj.(*appsv1.Deployment)
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr(int32(1))
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("25%"))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	}
	core.DefaultPodSpec(&d.Spec.Template.Spec)
}

// PrepareForCreate clears the status: it is the controller's to write.
func (deploymentStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*appsv1.Deployment).Status = appsv1.DeploymentStatus{}
}

func (deploymentStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateDeploymentSpec(&obj.(*appsv1.Deployment).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps the selector fixed, as apps/v1 does.
func (deploymentStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	d, oldD := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
	allErrs := validateDeploymentSpec(&d.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(d.Spec.Selector, oldD.Spec.Selector, field.NewPath("spec", "selector"))...)
	return append(allErrs, validateDeploymentStatus(&d.Status, &oldD.Status)...)
}

func validateDeploymentSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateNonnegative(replicas(spec.Replicas), fldPath.Child("replicas"))
	allErrs = append(allErrs, validateRequiredSelector(spec.Selector, "deployment", fldPath.Child("selector"))...)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("selector"), spec.Selector, "invalid label selector"))
	} else {
		allErrs = append(allErrs, validateReplicatedTemplate(&spec.Template, sel, "ReplicaSet", fldPath.Child("template"))...)
	}
	allErrs = append(allErrs, validateDeploymentStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	allErrs = append(allErrs, validateNonnegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	if p := spec.ProgressDeadlineSeconds; p != nil {
		allErrs = append(allErrs, validateNonnegative(*p, fldPath.Child("progressDeadlineSeconds"))...)
		if *p <= spec.MinReadySeconds {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), *p, "must be greater than minReadySeconds"))
		}
	}
	return allErrs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", appsv1.RecreateDeploymentStrategyType))}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		ru, p := s.RollingUpdate, fldPath.Child("rollingUpdate")
		allErrs := validatePositiveIntOrPercent(ru.MaxUnavailable, p.Child("maxUnavailable"))
		allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxSurge, p.Child("maxSurge"))...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
		return append(allErrs, validateNotMoreThan100Percent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
	default:
		return field.ErrorList{field.NotSupported(fldPath, *s,
			[]string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
}

func deploymentPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			{Name: "Up-to-date", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
			{Name: "Available", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []interface{} {
			d := obj.(*appsv1.Deployment)
			sel, err := selectorString(d.Spec.Selector)
			if err != nil {
				sel = "<invalid>"
			}
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			return []interface{}{d.Name,
				fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas),
				registry.Age(d.CreationTimestamp), names, images, sel}
		},
	}
}

func ptr[T any](v T) *T { return &v }

// ValidateStatusUpdate checks a write through the status subresource: the status
// only, as upstream's status strategy (the spec is the stored one).
func (deploymentStrategy) ValidateStatusUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateDeploymentStatus(&obj.(*appsv1.Deployment).Status, &old.(*appsv1.Deployment).Status)
}
