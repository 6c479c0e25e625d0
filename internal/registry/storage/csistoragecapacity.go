package storage

import (
	"context"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

func csiStorageCapacities() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "csistoragecapacities",
		Kind:         "CSIStorageCapacity",
		SingularName: "csistoragecapacity",
		Namespaced:   true,
		New:          func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
		NewList:      func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		Strategy:     csiStorageCapacityStrategy{},
		// Upstream serves these with the default table (NAME, CREATED AT).
		Printer: createdAtPrinter,
	}
}

type csiStorageCapacityStrategy struct{ registry.BaseStrategy }

func (csiStorageCapacityStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateCapacity(obj.(*storagev1.CSIStorageCapacity), metav1validation.LabelSelectorValidationOptions{})
}

// ValidateUpdate keeps the inputs of a capacity query fixed: the topology and the
// class it was measured for.
func (csiStorageCapacityStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c, oldC := obj.(*storagev1.CSIStorageCapacity), old.(*storagev1.CSIStorageCapacity)
	var opts metav1validation.LabelSelectorValidationOptions
	if len(metav1validation.ValidateLabelSelector(oldC.NodeTopology, opts, nil)) > 0 {
		opts.AllowInvalidLabelValueInSelector = true
	}
	allErrs := validateCapacity(c, opts)
	if !apiequality.Semantic.DeepEqual(c.NodeTopology, oldC.NodeTopology) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("nodeTopology"), c.NodeTopology, "field is immutable"))
	}
	if c.StorageClassName != oldC.StorageClassName {
		allErrs = append(allErrs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, "field is immutable"))
	}
	return allErrs
}

func validateCapacity(c *storagev1.CSIStorageCapacity, opts metav1validation.LabelSelectorValidationOptions) field.ErrorList {
	allErrs := metav1validation.ValidateLabelSelector(c.NodeTopology, opts, field.NewPath("nodeTopology"))
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(c.StorageClassName, false) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, msg))
	}
	if c.Capacity != nil && c.Capacity.Cmp(resource.Quantity{}) < 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
	}
	return allErrs
}
