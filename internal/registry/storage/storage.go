// Package storage describes the storage.k8s.io/v1 resources: storageclasses,
// csidrivers, csinodes and volumeattachments, with their defaulting, validation and
// printing as upstream Kubernetes does them.
package storage

import (
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the storage.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{storageClasses(), csiDrivers(), csiNodes(), volumeAttachments()}
}

var groupVersion = storagev1.SchemeGroupVersion

// maxDriverNameLength is upstream's limit on CSI driver names.
const maxDriverNameLength = 63

// validateDriverName checks a CSI driver name (a CSIDriver's name, a CSINode driver,
// a VolumeAttachment's attacher) as upstream does.
func validateDriverName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	if len(name) > maxDriverNameLength {
		allErrs = append(allErrs, field.TooLong(fldPath, name, maxDriverNameLength))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	return allErrs
}

// validateQualifiedName reports each way value is not a qualified name
// ("prefix/name" with a DNS subdomain prefix), as upstream words it.
func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}
