package storage

import (
	"context"
	"reflect"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// volumeAttributesClasses is storage.k8s.io/v1 volumeattributesclasses: the mutable
// attributes (IOPS, throughput...) a CSI driver applies to a volume that names the class.
// Nothing in mizzen acts on a class yet; it is stored and served as upstream's API.
func volumeAttributesClasses() *registry.Resource {
	doc := storagev1.VolumeAttributesClass{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "volumeattributesclasses",
		Kind:         "VolumeAttributesClass",
		SingularName: "volumeattributesclass",
		ShortNames:   []string{"vac"},
		New:          func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
		NewList:      func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
		Strategy:     volumeAttributesClassStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "DriverName", Type: "string", Description: doc["driverName"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				c := obj.(*storagev1.VolumeAttributesClass)
				return []interface{}{c.Name, c.DriverName, registry.Age(c.CreationTimestamp)}
			},
		},
	}
}

type volumeAttributesClassStrategy struct{ registry.BaseStrategy }

// Validate checks a class as upstream does: a driver name in the form of a provisioner,
// and at least one parameter.
func (volumeAttributesClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	c := obj.(*storagev1.VolumeAttributesClass)
	var allErrs field.ErrorList
	driverPath := field.NewPath("driverName")
	if c.DriverName == "" {
		allErrs = append(allErrs, field.Required(driverPath, c.DriverName))
	} else {
		allErrs = append(allErrs, validateQualifiedName(strings.ToLower(c.DriverName), driverPath)...)
	}
	paramsPath := field.NewPath("parameters")
	allErrs = append(allErrs, validateParameters(c.Parameters, paramsPath)...)
	if len(c.Parameters) == 0 {
		allErrs = append(allErrs, field.Required(paramsPath, "must contain at least one key/value pair"))
	}
	return allErrs
}

// ValidateUpdate: the driver and the parameters are fixed once created; labels and
// annotations may change.
func (s volumeAttributesClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, oldC := obj.(*storagev1.VolumeAttributesClass), old.(*storagev1.VolumeAttributesClass)
	allErrs := s.Validate(ctx, obj)
	if c.DriverName != oldC.DriverName {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
	}
	if !reflect.DeepEqual(c.Parameters, oldC.Parameters) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	return allErrs
}
