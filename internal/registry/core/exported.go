package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateTolerations checks tolerations as a pod's are checked, for other resources
// that carry them (a RuntimeClass's scheduling).
func ValidateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	return validateTolerations(tolerations, fldPath)
}

// ValidateResourceList checks the names and quantities of a resource list (a
// RuntimeClass's pod overhead): qualified names, non-negative amounts.
func ValidateResourceList(list corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedResourceNames(list) {
		p := fldPath.Key(string(name))
		errs = append(errs, validateResourceName(name, p)...)
		errs = append(errs, validateNonNegativeQuantity(list[name], p)...)
	}
	return errs
}
