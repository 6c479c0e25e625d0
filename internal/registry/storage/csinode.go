package storage

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// maxNodeIDLength is upstream's limit on a CSINode driver's nodeID.
const maxNodeIDLength = 192

func csiNodes() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "csinodes",
		Kind:         "CSINode",
		SingularName: "csinode",
		New:          func() runtime.Object { return &storagev1.CSINode{} },
		NewList:      func() runtime.Object { return &storagev1.CSINodeList{} },
		Strategy:     csiNodeStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				n := obj.(*storagev1.CSINode)
				return []interface{}{n.Name, int64(len(n.Spec.Drivers)), registry.Age(n.CreationTimestamp)}
			},
		},
	}
}

type csiNodeStrategy struct{ registry.BaseStrategy }

func (csiNodeStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, d := range obj.(*storagev1.CSINode).Spec.Drivers {
		driverPath := field.NewPath("spec", "drivers").Index(i)
		allErrs = append(allErrs, validateDriverName(d.Name, driverPath.Child("name"))...)
		nodeIDPath := driverPath.Child("nodeID")
		if d.NodeID == "" {
			allErrs = append(allErrs, field.Required(nodeIDPath, d.NodeID))
		}
		if len(d.NodeID) > maxNodeIDLength {
			allErrs = append(allErrs, field.Invalid(nodeIDPath, d.NodeID, fmt.Sprintf("must be %d characters or less", maxNodeIDLength)))
		}
		if d.Allocatable != nil && d.Allocatable.Count != nil {
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*d.Allocatable.Count), driverPath.Child("allocatable", "count"))...)
		}
		if names[d.Name] {
			allErrs = append(allErrs, field.Duplicate(driverPath.Child("name"), d.Name))
		}
		names[d.Name] = true
		// Upstream reports topology key problems at the driver's path.
		keys := map[string]bool{}
		for _, key := range d.TopologyKeys {
			if key == "" {
				allErrs = append(allErrs, field.Required(driverPath, key))
			}
			if keys[key] {
				allErrs = append(allErrs, field.Duplicate(driverPath, key))
			}
			keys[key] = true
			allErrs = append(allErrs, validateQualifiedName(key, driverPath)...)
		}
	}
	return allErrs
}

// ValidateUpdate also refuses changes to a registered driver's entry; drivers may
// only be added or removed. The allocatable count may change, as the kubelet
// refreshes it.
func (s csiNodeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	allErrs := s.Validate(ctx, obj)
	for _, oldDriver := range old.(*storagev1.CSINode).Spec.Drivers {
		for _, driver := range obj.(*storagev1.CSINode).Spec.Drivers {
			if driver.Name != oldDriver.Name {
				continue
			}
			a, b := driver, oldDriver
			a.Allocatable, b.Allocatable = nil, nil
			allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(a, b, field.NewPath("spec", "drivers"))...)
		}
	}
	return allErrs
}
