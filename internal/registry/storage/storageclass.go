package storage

import (
	"context"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Annotations that mark the default storage class; the beta one is still honoured.
const (
	isDefaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// Upstream's limits on a storage class's parameters.
const (
	maxParameterCount = 512
	maxParameterSize  = 256 * (1 << 10)
)

func storageClasses() *registry.Resource {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "storageclasses",
		Kind:         "StorageClass",
		SingularName: "storageclass",
		ShortNames:   []string{"sc"},
		New:          func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:      func() runtime.Object { return &storagev1.StorageClassList{} },
		Strategy:     storageClassStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Provisioner", Type: "string", Description: doc["provisioner"]},
				{Name: "ReclaimPolicy", Type: "string", Description: doc["reclaimPolicy"]},
				{Name: "VolumeBindingMode", Type: "string", Description: doc["volumeBindingMode"]},
				{Name: "AllowVolumeExpansion", Type: "string", Description: doc["allowVolumeExpansion"]},
				registry.AgeColumn,
			},
			Row: printStorageClass,
		},
	}
}

// IsDefaultClass reports whether a storage class is marked as the cluster's default.
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[isDefaultClassAnnotation] == "true" || sc.Annotations[betaIsDefaultClassAnnotation] == "true"
}

func printStorageClass(obj runtime.Object) []interface{} {
	sc := obj.(*storagev1.StorageClass)
	name := sc.Name
	if IsDefaultClass(sc) {
		name += " (default)"
	}
	reclaimPolicy := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaimPolicy = string(*sc.ReclaimPolicy)
	}
	bindingMode := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		bindingMode = string(*sc.VolumeBindingMode)
	}
	allowExpansion := false
	if sc.AllowVolumeExpansion != nil {
		allowExpansion = *sc.AllowVolumeExpansion
	}
	return []interface{}{name, sc.Provisioner, reclaimPolicy, bindingMode, allowExpansion, registry.Age(sc.CreationTimestamp)}
}

type storageClassStrategy struct{ registry.BaseStrategy }

func (storageClassStrategy) Default(obj runtime.Object) {
	sc := obj.(*storagev1.StorageClass)
	if sc.ReclaimPolicy == nil {
		policy := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &policy
	}
	if sc.VolumeBindingMode == nil {
		mode := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &mode
	}
}

var (
	supportedReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	supportedBindingModes    = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

func (storageClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	sc := obj.(*storagev1.StorageClass)
	var allErrs field.ErrorList
	provisionerPath := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		allErrs = append(allErrs, field.Required(provisionerPath, sc.Provisioner))
	} else {
		allErrs = append(allErrs, validateQualifiedName(strings.ToLower(sc.Provisioner), provisionerPath)...)
	}
	allErrs = append(allErrs, validateParameters(sc.Parameters, field.NewPath("parameters"))...)
	if sc.ReclaimPolicy != nil && *sc.ReclaimPolicy != "" &&
		*sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete && *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("reclaimPolicy"), *sc.ReclaimPolicy, supportedReclaimPolicies))
	}
	modePath := field.NewPath("volumeBindingMode")
	switch {
	case sc.VolumeBindingMode == nil:
		allErrs = append(allErrs, field.Required(modePath, ""))
	case *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate && *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer:
		allErrs = append(allErrs, field.NotSupported(modePath, *sc.VolumeBindingMode, supportedBindingModes))
	}
	return append(allErrs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

func (s storageClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	sc, oldSC := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
	allErrs := s.Validate(ctx, obj)
	if !reflect.DeepEqual(sc.Parameters, oldSC.Parameters) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != oldSC.Provisioner {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !reflect.DeepEqual(sc.ReclaimPolicy, oldSC.ReclaimPolicy) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(sc.VolumeBindingMode, oldSC.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

func validateParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	if len(params) > maxParameterCount {
		return field.ErrorList{field.TooLong(fldPath, "Provisioner Parameters exceeded max allowed", maxParameterCount)}
	}
	var allErrs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			allErrs = append(allErrs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxParameterSize {
		allErrs = append(allErrs, field.TooLong(fldPath, "", maxParameterSize))
	}
	return allErrs
}

func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	var seen []map[string]map[string]bool
	for i, term := range terms {
		termPath := fldPath.Index(i)
		expressions := map[string]map[string]bool{}
		for j, req := range term.MatchLabelExpressions {
			reqPath := termPath.Child("matchLabelExpressions").Index(j)
			valuesPath := reqPath.Child("values")
			if len(req.Values) == 0 {
				allErrs = append(allErrs, field.Required(valuesPath, ""))
			}
			values := map[string]bool{}
			for k, v := range req.Values {
				if values[v] {
					allErrs = append(allErrs, field.Duplicate(valuesPath.Index(k), v))
				}
				values[v] = true
			}
			allErrs = append(allErrs, metav1validation.ValidateLabelName(req.Key, reqPath.Child("key"))...)
			if _, dup := expressions[req.Key]; dup {
				allErrs = append(allErrs, field.Duplicate(reqPath.Child("key"), req.Key))
			}
			expressions[req.Key] = values
		}
		for _, earlier := range seen {
			if reflect.DeepEqual(earlier, expressions) {
				allErrs = append(allErrs, field.Duplicate(termPath.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, expressions)
	}
	return allErrs
}
