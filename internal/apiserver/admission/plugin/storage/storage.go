// Package storage holds upstream's storage admission plugins: DefaultStorageClass
// (a new claim naming no class gets the default StorageClass) and
// StorageObjectInUseProtection (new claims and volumes get the protection finalizers
// that the PV controllers remove once nothing uses them).
package storage

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"mizzen/internal/apiserver/admission"
)

// Upstream's names.
const (
	DefaultClassPluginName    = "DefaultStorageClass"
	InUseProtectionPluginName = "StorageObjectInUseProtection"

	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"

	isDefaultAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

var storageClassesGVR = storagev1.SchemeGroupVersion.WithResource("storageclasses")

// DefaultClass is DefaultStorageClass.
type DefaultClass struct {
	admission.Ops
	reader admission.Reader
}

// NewDefaultClass returns DefaultStorageClass reading StorageClasses through r.
func NewDefaultClass(r admission.Reader) *DefaultClass {
	return &DefaultClass{Ops: admission.Ops{admission.Create}, reader: r}
}

var _ admission.Mutator = (*DefaultClass)(nil)

// Admit gives a claim without storageClassName the default class, if there is one.
func (d *DefaultClass) Admit(ctx context.Context, a *admission.Attributes) error {
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || a.Subresource != "" || pvc.Spec.StorageClassName != nil {
		return nil
	}
	if _, legacy := pvc.Annotations[corev1.BetaStorageClassAnnotation]; legacy {
		return nil
	}
	objs, err := d.reader.List(ctx, storageClassesGVR, "")
	if err != nil {
		return err
	}
	var def *storagev1.StorageClass
	for _, o := range objs {
		sc := o.(*storagev1.StorageClass)
		if sc.Annotations[isDefaultAnnotation] != "true" && sc.Annotations[betaIsDefaultAnnotation] != "true" {
			continue
		}
		// Of several defaults the newest wins, as upstream's; ties by name.
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name) {
			def = sc
		}
	}
	if def != nil {
		name := def.Name
		pvc.Spec.StorageClassName = &name
	}
	return nil
}

// InUseProtection is StorageObjectInUseProtection.
type InUseProtection struct{ admission.Ops }

// NewInUseProtection returns StorageObjectInUseProtection.
func NewInUseProtection() *InUseProtection {
	return &InUseProtection{Ops: admission.Ops{admission.Create}}
}

var _ admission.Mutator = (*InUseProtection)(nil)

// Admit adds the protection finalizer to a new claim or volume.
func (p *InUseProtection) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	switch o := a.Object.(type) {
	case *corev1.PersistentVolumeClaim:
		if !slices.Contains(o.Finalizers, PVCProtectionFinalizer) {
			o.Finalizers = append(o.Finalizers, PVCProtectionFinalizer)
		}
	case *corev1.PersistentVolume:
		if !slices.Contains(o.Finalizers, PVProtectionFinalizer) {
			o.Finalizers = append(o.Finalizers, PVProtectionFinalizer)
		}
	}
	return nil
}
