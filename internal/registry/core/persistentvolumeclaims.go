package core

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func persistentVolumeClaimsResource() *registry.Resource {
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "persistentvolumeclaims",
		Kind:         "PersistentVolumeClaim",
		SingularName: "persistentvolumeclaim",
		Namespaced:   true,
		ShortNames:   []string{"pvc"},
		New:          func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:      func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Strategy: strategy[*corev1.PersistentVolumeClaim]{
			defaults: func(pvc *corev1.PersistentVolumeClaim) {
				if pvc.Status.Phase == "" {
					pvc.Status.Phase = corev1.ClaimPending
				}
				defaultPVCSpec(&pvc.Spec)
			},
			prepareCreate: func(_ context.Context, pvc *corev1.PersistentVolumeClaim) {
				pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
			},
			validate:       validatePersistentVolumeClaim,
			validateUpdate: validatePersistentVolumeClaimUpdate,
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Status", "string", status["phase"]),
			column("Volume", "string", spec["volumeName"]),
			column("Capacity", "string", status["capacity"]),
			column("Access Modes", "string", status["accessModes"]),
			column("StorageClass", "string", "StorageClass of the pvc"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
			registry.AgeColumn,
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		}, persistentVolumeClaimRow),
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
	}
}

func validatePersistentVolumeClaim(_ context.Context, pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	return validatePVCSpec(&pvc.Spec, field.NewPath("spec"))
}

// validatePVCSpec checks a claim's spec, also as a pod's ephemeral volume template.
func validatePVCSpec(spec *corev1.PersistentVolumeClaimSpec, specPath *field.Path) field.ErrorList {
	errs := validateAccessModes(spec.AccessModes, specPath.Child("accessModes"), "at least 1 access mode is required")
	storagePath := specPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else {
		errs = append(errs, validatePositiveQuantity(q, storagePath)...)
	}
	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		errs = append(errs, validateStorageClassName(*spec.StorageClassName, specPath.Child("storageClassName"))...)
	}
	errs = append(errs, validateVolumeMode(spec.VolumeMode, specPath.Child("volumeMode"))...)
	if spec.Selector != nil {
		errs = append(errs, validateLabelSelector(spec.Selector, specPath.Child("selector"))...)
	}
	return errs
}

// validatePersistentVolumeClaimUpdate allows only a bigger storage request, a new
// volume attributes class and binding to a volume; the rest of the spec is fixed.
func validatePersistentVolumeClaimUpdate(_ context.Context, pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	allowed := old.Spec.DeepCopy()
	var errs field.ErrorList
	if old.Status.Phase == corev1.ClaimBound {
		// Bound claims may be resized: grown, or shrunk back no lower than what they
		// have (recovery from a failed expansion), as upstream.
		allowed.Resources.Requests = pvc.Spec.Resources.Requests
		newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
		if have, ok := old.Status.Capacity[corev1.ResourceStorage]; ok && newSize.Cmp(oldSize) < 0 && newSize.Cmp(have) < 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
		}
	}
	allowed.VolumeAttributesClassName = pvc.Spec.VolumeAttributesClassName
	if old.Spec.VolumeName == "" {
		allowed.VolumeName = pvc.Spec.VolumeName
	}
	// A claim without a class may be given one once (the default class, assigned
	// retroactively by the persistentvolume-binder), as upstream allows.
	if old.Spec.StorageClassName == nil && old.Spec.VolumeName == "" {
		allowed.StorageClassName = pvc.Spec.StorageClassName
	}
	if !equality.Semantic.DeepEqual(*allowed, pvc.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
	}
	return errs
}

func persistentVolumeClaimRow(pvc *corev1.PersistentVolumeClaim) []interface{} {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = accessModesString(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = q.String()
	}
	class := ""
	if a, ok := pvc.Annotations[storageClassAnnotation]; ok {
		class = a
	} else if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	vac := "<unset>"
	if pvc.Spec.VolumeAttributesClassName != nil {
		vac = *pvc.Spec.VolumeAttributesClassName
	}
	mode := "<unset>"
	if pvc.Spec.VolumeMode != nil {
		mode = string(*pvc.Spec.VolumeMode)
	}
	return []interface{}{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, class, vac, registry.Age(pvc.CreationTimestamp), mode}
}

func validateLabelSelector(s *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, fldPath)
}
