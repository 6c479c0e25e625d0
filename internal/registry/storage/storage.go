// Package storage describes the storage.k8s.io/v1 resources: storageclasses,
// csidrivers, csinodes, csistoragecapacities, volumeattachments and
// volumeattributesclasses, with their defaulting, validation and printing as upstream
// Kubernetes does them.
package storage

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the storage.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{storageClasses(), csiDrivers(), csiNodes(), csiStorageCapacities(), volumeAttachments(), volumeAttributesClasses()}
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

// createdAtPrinter is upstream's default table for resources it gives no printer of
// their own: the name and the creation time in RFC 3339.
var createdAtPrinter = &registry.Printer{
	Columns: []metav1.TableColumnDefinition{
		registry.NameColumn,
		{Name: "Created At", Type: "date", Description: registry.AgeColumn.Description},
	},
	Row: func(obj runtime.Object) []interface{} {
		m := obj.(metav1.Object)
		return []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}
	},
}
