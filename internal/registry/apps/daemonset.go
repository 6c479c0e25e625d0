package apps

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// DaemonSets describes apps/v1 daemonsets.
func DaemonSets() *registry.Resource {
	return &registry.Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "daemonsets",
		Kind:         "DaemonSet",
		SingularName: "daemonset",
		Namespaced:   true,
		ShortNames:   []string{"ds"},
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:      func() runtime.Object { return &appsv1.DaemonSetList{} },
		Strategy:     daemonSetStrategy{},
		Printer:      daemonSetPrinter(),
		HasStatus:    true,
	}
}

type daemonSetStrategy struct{ registry.BaseStrategy }

func (daemonSetStrategy) Default(obj runtime.Object) {
	ds := obj.(*appsv1.DaemonSet)
	us := &ds.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if us.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if us.RollingUpdate == nil {
			us.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if us.RollingUpdate.MaxUnavailable == nil {
			us.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(1))
		}
		if us.RollingUpdate.MaxSurge == nil {
			us.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	core.DefaultPodSpec(&ds.Spec.Template.Spec)
}

// PrepareForCreate clears the status and starts the template generation at 1.
func (daemonSetStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	ds := obj.(*appsv1.DaemonSet)
	ds.Status = appsv1.DaemonSetStatus{}
	setTemplateGeneration(ds, 1)
}

// PrepareForUpdate keeps the template generation a client cannot set, and counts one
// more when the pod template changes.
func (daemonSetStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	ds, oldDS := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
	generation := templateGeneration(oldDS)
	if !apiequality.Semantic.DeepEqual(ds.Spec.Template, oldDS.Spec.Template) {
		generation++
	}
	setTemplateGeneration(ds, generation)
}

// templateGeneration reads the generation of a daemonset's pod template. apps/v1 has no
// field for it: upstream keeps it in the deprecated.daemonset.template.generation
// annotation, which clients (and the daemonset controller) read.
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	n, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func setTemplateGeneration(ds *appsv1.DaemonSet, generation int64) {
	annotations := make(map[string]string, len(ds.Annotations)+1)
	for k, v := range ds.Annotations {
		annotations[k] = v
	}
	annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(generation, 10)
	ds.Annotations = annotations
}

func (daemonSetStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateDaemonSetSpec(&obj.(*appsv1.DaemonSet).Spec, field.NewPath("spec"))
}

func (daemonSetStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ds, oldDS := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
	allErrs := validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(ds.Spec.Selector, oldDS.Spec.Selector, field.NewPath("spec", "selector"))...)
	return append(allErrs, validateDaemonSetStatus(&ds.Status, &oldDS.Status)...)
}

func validateDaemonSetSpec(spec *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	// Unlike the other workloads, a missing selector is reported only as one that does
	// not match the template, as upstream does.
	allErrs := metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	if sel := spec.Selector; sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("selector"), sel, "empty selector is invalid for daemonset"))
	}
	tp := fldPath.Child("template")
	allErrs = append(allErrs, core.ValidatePodTemplateSpec(&spec.Template, tp)...)
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(tp.Child("spec", "restartPolicy"), spec.Template.Spec.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if ads := spec.Template.Spec.ActiveDeadlineSeconds; ads != nil {
		allErrs = append(allErrs, field.Invalid(tp.Child("spec", "activeDeadlineSeconds"), *ads, "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	allErrs = append(allErrs, validateNonnegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	return append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		ru, p := s.RollingUpdate, fldPath.Child("rollingUpdate")
		allErrs := validatePositiveIntOrPercent(ru.MaxUnavailable, p.Child("maxUnavailable"))
		allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxSurge, p.Child("maxSurge"))...)
		allErrs = append(allErrs, validateNotMoreThan100Percent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		allErrs = append(allErrs, validateNotMoreThan100Percent(ru.MaxSurge, p.Child("maxSurge"))...)
		hasUnavailable, hasSurge := intOrPercentValue(ru.MaxUnavailable) != 0, intOrPercentValue(ru.MaxSurge) != 0
		switch {
		case hasUnavailable && hasSurge:
			allErrs = append(allErrs, field.Invalid(p.Child("maxSurge"), ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			allErrs = append(allErrs, field.Required(p.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
		return allErrs
	default:
		return field.ErrorList{field.NotSupported(fldPath, *s,
			[]string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
}

func daemonSetPrinter() *registry.Printer {
	st := extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Desired", Type: "integer", Description: st["desiredNumberScheduled"]},
			{Name: "Current", Type: "integer", Description: st["currentNumberScheduled"]},
			{Name: "Ready", Type: "integer", Description: st["numberReady"]},
			{Name: "Up-to-date", Type: "integer", Description: st["updatedNumberScheduled"]},
			{Name: "Available", Type: "integer", Description: st["numberAvailable"]},
			{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
		},
		Row: func(obj runtime.Object) []interface{} {
			ds := obj.(*appsv1.DaemonSet)
			s := ds.Status
			names, images := containerCells(ds.Spec.Template.Spec.Containers)
			return []interface{}{ds.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled),
				int64(s.NumberReady), int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable),
				labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector), registry.Age(ds.CreationTimestamp),
				names, images, metav1.FormatLabelSelector(ds.Spec.Selector)}
		},
	}
}

// ValidateStatusUpdate checks a write through the status subresource: the status
// only, as upstream's status strategy (the spec is the stored one).
func (daemonSetStrategy) ValidateStatusUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateDaemonSetStatus(&obj.(*appsv1.DaemonSet).Status, &old.(*appsv1.DaemonSet).Status)
}
