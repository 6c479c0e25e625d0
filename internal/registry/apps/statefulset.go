package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
)

// StatefulSets describes apps/v1 statefulsets.
func StatefulSets() *registry.Resource {
	return &registry.Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "statefulsets",
		Kind:         "StatefulSet",
		SingularName: "statefulset",
		Namespaced:   true,
		ShortNames:   []string{"sts"},
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNSSubdomain,
		New:          func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:      func() runtime.Object { return &appsv1.StatefulSetList{} },
		Strategy:     statefulSetStrategy{},
		Printer:      statefulSetPrinter(),
		HasStatus:    true,
		Scale: &registry.ScaleAdapter{
			Get: func(obj runtime.Object) (int32, int32, string) {
				ss := obj.(*appsv1.StatefulSet)
				return replicas(ss.Spec.Replicas), ss.Status.Replicas, scaleSelector(ss.Spec.Selector)
			},
			Set: func(obj runtime.Object, n int32) { obj.(*appsv1.StatefulSet).Spec.Replicas = &n },
		},
	}
}

type statefulSetStrategy struct{ registry.BaseStrategy }

// Default applies upstream's apps/v1 statefulset defaults, including the defaults of the
// claims in volumeClaimTemplates and of the pod template.
func (statefulSetStrategy) Default(obj runtime.Object) {
	ss := obj.(*appsv1.StatefulSet)
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := spec.UpdateStrategy.RollingUpdate; spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = ptr(int32(0))
		}
		// MaxUnavailableStatefulSet is beta and on by default upstream.
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptr(intstr.FromInt32(1))
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		spec.Replicas = ptr(int32(1))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptr(int32(10))
	}
	for i := range spec.VolumeClaimTemplates {
		pvc := &spec.VolumeClaimTemplates[i]
		if pvc.Status.Phase == "" {
			pvc.Status.Phase = corev1.ClaimPending
		}
		if pvc.Spec.VolumeMode == nil {
			pvc.Spec.VolumeMode = ptr(corev1.PersistentVolumeFilesystem)
		}
	}
	core.DefaultPodSpec(&spec.Template.Spec)
}

func (statefulSetStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*appsv1.StatefulSet).Status = appsv1.StatefulSetStatus{}
}

func (statefulSetStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateStatefulSetSpec(&obj.(*appsv1.StatefulSet).Spec, field.NewPath("spec"))
}

// ValidateUpdate allows changing only the fields upstream lets change.
func (statefulSetStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ss, oldSS := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
	allErrs := validateStatefulSetSpec(&ss.Spec, field.NewPath("spec"))

	mutable := ss.Spec.DeepCopy()
	mutable.Replicas = oldSS.Spec.Replicas
	mutable.Template = oldSS.Spec.Template
	mutable.UpdateStrategy = oldSS.Spec.UpdateStrategy
	mutable.MinReadySeconds = oldSS.Spec.MinReadySeconds
	mutable.Ordinals = oldSS.Spec.Ordinals
	mutable.RevisionHistoryLimit = oldSS.Spec.RevisionHistoryLimit
	mutable.PersistentVolumeClaimRetentionPolicy = oldSS.Spec.PersistentVolumeClaimRetentionPolicy
	if !apiequality.Semantic.DeepEqual(*mutable, oldSS.Spec) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return append(allErrs, validateStatefulSetStatus(&ss.Status, &oldSS.Status)...)
}

func validateStatefulSetSpec(spec *appsv1.StatefulSetSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}

	usPath := fldPath.Child("updateStrategy")
	switch spec.UpdateStrategy.Type {
	case "":
		allErrs = append(allErrs, field.Required(usPath, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if spec.UpdateStrategy.RollingUpdate != nil {
			allErrs = append(allErrs, field.Invalid(usPath.Child("rollingUpdate"), spec.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil {
			p := usPath.Child("rollingUpdate")
			allErrs = append(allErrs, validateNonnegativePtr(ru.Partition, p.Child("partition"))...)
			if ru.MaxUnavailable != nil {
				allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
				if intOrPercentValue(ru.MaxUnavailable) == 0 {
					allErrs = append(allErrs, field.Invalid(p.Child("maxUnavailable"), *ru.MaxUnavailable, "cannot be 0"))
				}
				allErrs = append(allErrs, validateNotMoreThan100Percent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
			}
		}
	default:
		allErrs = append(allErrs, field.Invalid(usPath, spec.UpdateStrategy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}

	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		allErrs = append(allErrs, validateRetentionPolicyType(p.WhenDeleted, pp.Child("whenDeleted"))...)
		allErrs = append(allErrs, validateRetentionPolicyType(p.WhenScaled, pp.Child("whenScaled"))...)
	}
	allErrs = append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	allErrs = append(allErrs, validateNonnegative(replicas(spec.Replicas), fldPath.Child("replicas"))...)
	if spec.Ordinals != nil {
		allErrs = append(allErrs, validateNonnegative(spec.Ordinals.Start, fldPath.Child("ordinals.start"))...)
	}
	allErrs = append(allErrs, validateNonnegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	if spec.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(spec.ServiceName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("serviceName"), spec.ServiceName, msg))
		}
	}

	allErrs = append(allErrs, validateRequiredSelector(spec.Selector, "statefulset", fldPath.Child("selector"))...)
	tp := fldPath.Child("template")
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("selector"), spec.Selector, ""))
	} else {
		allErrs = append(allErrs, validateTemplateLabelsMatch(sel, &spec.Template, tp)...)
		allErrs = append(allErrs, core.ValidatePodTemplateSpec(templateWithClaims(spec), tp)...)
	}
	return append(allErrs, validateAlwaysRestart(&spec.Template.Spec, "StatefulSet", tp.Child("spec"))...)
}

// templateWithClaims is the pod template as the controller will create its pods: each
// volumeClaimTemplate becomes a persistentVolumeClaim volume of the same name (replacing a
// template volume so named), so containers may mount the claims. Upstream skips pod spec
// validation for StatefulSets for this reason; validating the union keeps every other check.
func templateWithClaims(spec *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(spec.VolumeClaimTemplates) == 0 {
		return &spec.Template
	}
	t := spec.Template.DeepCopy()
	for _, claim := range spec.VolumeClaimTemplates {
		vol := corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
		}}
		replaced := false
		for i := range t.Spec.Volumes {
			if t.Spec.Volumes[i].Name == claim.Name {
				t.Spec.Volumes[i], replaced = vol, true
			}
		}
		if !replaced {
			t.Spec.Volumes = append(t.Spec.Volumes, vol)
		}
	}
	return t
}

func validateRetentionPolicyType(t appsv1.PersistentVolumeClaimRetentionPolicyType, fldPath *field.Path) field.ErrorList {
	switch t {
	case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, t, []string{
		string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)})}
}

func statefulSetPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
		},
		Row: func(obj runtime.Object) []interface{} {
			ss := obj.(*appsv1.StatefulSet)
			names, images := containerCells(ss.Spec.Template.Spec.Containers)
			return []interface{}{ss.Name, fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, replicas(ss.Spec.Replicas)),
				registry.Age(ss.CreationTimestamp), names, images}
		},
	}
}

// ValidateStatusUpdate checks a write through the status subresource: the status
// only, as upstream's status strategy (the spec is the stored one).
func (statefulSetStrategy) ValidateStatusUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateStatefulSetStatus(&obj.(*appsv1.StatefulSet).Status, &old.(*appsv1.StatefulSet).Status)
}
