package storage

import (
	"context"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Bounds of a token request's expirationSeconds.
const (
	minTokenExpirationSeconds = 10 * 60
	maxTokenExpirationSeconds = 1 << 32
	// minAllocatableUpdatePeriodSeconds bounds how often the kubelet refreshes counts.
	minAllocatableUpdatePeriodSeconds = 10
)

func csiDrivers() *registry.Resource {
	doc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "csidrivers",
		Kind:         "CSIDriver",
		SingularName: "csidriver",
		New:          func() runtime.Object { return &storagev1.CSIDriver{} },
		NewList:      func() runtime.Object { return &storagev1.CSIDriverList{} },
		Strategy:     csiDriverStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "AttachRequired", Type: "boolean", Description: doc["attachRequired"]},
				{Name: "PodInfoOnMount", Type: "boolean", Description: doc["podInfoOnMount"]},
				{Name: "StorageCapacity", Type: "boolean", Description: doc["storageCapacity"]},
				{Name: "TokenRequests", Type: "string", Description: doc["tokenRequests"]},
				{Name: "RequiresRepublish", Type: "boolean", Description: doc["requiresRepublish"]},
				{Name: "Modes", Type: "string", Description: doc["volumeLifecycleModes"]},
				registry.AgeColumn,
			},
			Row: printCSIDriver,
		},
	}
}

func printCSIDriver(obj runtime.Object) []interface{} {
	d := obj.(*storagev1.CSIDriver)
	deref := func(b *bool, unset bool) bool {
		if b == nil {
			return unset
		}
		return *b
	}
	var modes []string
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	modesCell := strings.Join(modes, ",")
	if modesCell == "" {
		modesCell = "<none>"
	}
	tokenRequests := "<unset>"
	if d.Spec.TokenRequests != nil {
		var audiences []string
		for _, t := range d.Spec.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokenRequests = strings.Join(audiences, ",")
	}
	return []interface{}{d.Name, deref(d.Spec.AttachRequired, true), deref(d.Spec.PodInfoOnMount, false),
		deref(d.Spec.StorageCapacity, false), tokenRequests, deref(d.Spec.RequiresRepublish, false),
		modesCell, registry.Age(d.CreationTimestamp)}
}

type csiDriverStrategy struct{ registry.BaseStrategy }

func (csiDriverStrategy) Default(obj runtime.Object) {
	spec := &obj.(*storagev1.CSIDriver).Spec
	setBool := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	setBool(&spec.AttachRequired, true)
	setBool(&spec.PodInfoOnMount, false)
	setBool(&spec.StorageCapacity, false)
	setBool(&spec.RequiresRepublish, false)
	setBool(&spec.SELinuxMount, false)
	if spec.FSGroupPolicy == nil {
		policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
		spec.FSGroupPolicy = &policy
	}
	if len(spec.VolumeLifecycleModes) == 0 {
		spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
}

var (
	supportedFSGroupPolicies = []string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy), string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)}
	supportedLifecycleModes  = []string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}
)

func (csiDriverStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	spec := &obj.(*storagev1.CSIDriver).Spec
	fldPath := field.NewPath("spec")
	var allErrs field.ErrorList
	required := func(set bool, name string) {
		if !set {
			allErrs = append(allErrs, field.Required(fldPath.Child(name), ""))
		}
	}
	// upstream names this path "attachedRequired"
	required(spec.AttachRequired != nil, "attachedRequired")
	required(spec.PodInfoOnMount != nil, "podInfoOnMount")
	required(spec.StorageCapacity != nil, "storageCapacity")
	if spec.FSGroupPolicy != nil && !contains(supportedFSGroupPolicies, string(*spec.FSGroupPolicy)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupPolicy"), *spec.FSGroupPolicy, supportedFSGroupPolicies))
	}
	audiences := map[string]bool{}
	for i, tr := range spec.TokenRequests {
		trPath := fldPath.Child("tokenRequests").Index(i)
		if audiences[tr.Audience] {
			allErrs = append(allErrs, field.Duplicate(trPath.Child("audience"), tr.Audience))
			continue
		}
		audiences[tr.Audience] = true
		if tr.ExpirationSeconds == nil {
			continue
		}
		if *tr.ExpirationSeconds < minTokenExpirationSeconds {
			allErrs = append(allErrs, field.Invalid(trPath.Child("expirationSeconds"), *tr.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
		}
		if *tr.ExpirationSeconds > maxTokenExpirationSeconds {
			allErrs = append(allErrs, field.Invalid(trPath.Child("expirationSeconds"), *tr.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
		}
	}
	for _, mode := range spec.VolumeLifecycleModes {
		if !contains(supportedLifecycleModes, string(mode)) {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeLifecycleModes"), mode, supportedLifecycleModes))
		}
	}
	required(spec.SELinuxMount != nil, "seLinuxMount")
	if p := spec.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < minAllocatableUpdatePeriodSeconds {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	return allErrs
}

func (s csiDriverStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	spec, oldSpec := &obj.(*storagev1.CSIDriver).Spec, &old.(*storagev1.CSIDriver).Spec
	allErrs := s.Validate(ctx, obj)
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(spec.AttachRequired, oldSpec.AttachRequired, specPath.Child("attachedRequired"))...)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(spec.VolumeLifecycleModes, oldSpec.VolumeLifecycleModes, specPath.Child("volumeLifecycleModes"))...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
