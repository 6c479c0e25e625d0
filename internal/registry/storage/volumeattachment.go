package storage

import (
	"context"
	"math"
	"reflect"

	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func volumeAttachments() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "volumeattachments",
		Kind:         "VolumeAttachment",
		SingularName: "volumeattachment",
		New:          func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList:      func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Strategy:     volumeAttachmentStrategy{},
		HasStatus:    true,
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
				{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
				{Name: "Node", Type: "string", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]},
				{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				va := obj.(*storagev1.VolumeAttachment)
				pv := ""
				if va.Spec.Source.PersistentVolumeName != nil {
					pv = *va.Spec.Source.PersistentVolumeName
				}
				return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, registry.Age(va.CreationTimestamp)}
			},
		},
	}
}

type volumeAttachmentStrategy struct{ registry.BaseStrategy }

// PrepareForCreate starts an attachment with no status: only the attacher reports one.
func (volumeAttachmentStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
}

const exactlyOneSource = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"

func (volumeAttachmentStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	spec := &obj.(*storagev1.VolumeAttachment).Spec
	specPath := field.NewPath("spec")
	allErrs := validateDriverName(spec.Attacher, specPath.Child("attacher"))
	sourcePath := specPath.Child("source")
	src := spec.Source
	switch {
	case src.PersistentVolumeName == nil && src.InlineVolumeSpec == nil:
		allErrs = append(allErrs, field.Required(sourcePath, exactlyOneSource))
	case src.PersistentVolumeName != nil && src.InlineVolumeSpec != nil:
		allErrs = append(allErrs, field.Forbidden(sourcePath, exactlyOneSource))
	case src.PersistentVolumeName != nil:
		pvPath := sourcePath.Child("persistentVolumeName")
		if *src.PersistentVolumeName == "" {
			allErrs = append(allErrs, field.Required(pvPath, "must specify non empty persistentVolumeName"))
			break
		}
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(*src.PersistentVolumeName, false) {
			allErrs = append(allErrs, field.Invalid(pvPath, *src.PersistentVolumeName, msg))
		}
	}
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(spec.NodeName, false) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("nodeName"), spec.NodeName, msg))
	}
	return append(allErrs, validateAttachmentStatus(&obj.(*storagev1.VolumeAttachment).Status, field.NewPath("status"))...)
}

// Upstream's limits on what an attacher reports.
const (
	maxAttachmentMetadataSize = 256 * (1 << 10)
	maxVolumeErrorMessageSize = 1024
)

func validateAttachmentStatus(status *storagev1.VolumeAttachmentStatus, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	size := 0
	for k, v := range status.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachmentMetadataSize {
		allErrs = append(allErrs, field.TooLong(fldPath.Child("attachmentMetadata"), "", maxAttachmentMetadataSize))
	}
	for _, v := range []struct {
		name string
		e    *storagev1.VolumeError
	}{{"attachError", status.AttachError}, {"detachError", status.DetachError}} {
		name, e := v.name, v.e
		if e == nil {
			continue
		}
		if len(e.Message) > maxVolumeErrorMessageSize {
			// upstream reports the metadata limit here
			allErrs = append(allErrs, field.TooLong(fldPath.Child(name, "message"), "", maxAttachmentMetadataSize))
		}
		if e.ErrorCode != nil && *e.ErrorCode < 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(name, "errorCode"), *e.ErrorCode, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
	}
	return allErrs
}

// ValidateUpdate refuses any change to the spec: an attachment is replaced, never edited.
func (s volumeAttachmentStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	allErrs := s.Validate(ctx, obj)
	va, oldVA := obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment)
	if !reflect.DeepEqual(va.Spec, oldVA.Spec) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec"), va.Spec, "field is immutable"))
	}
	return allErrs
}
