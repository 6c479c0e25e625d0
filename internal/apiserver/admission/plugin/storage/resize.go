package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/apiserver/admission"
)

// ResizePluginName is upstream's name of the plugin that refuses claim expansions the
// cluster cannot carry out.
const ResizePluginName = "PersistentVolumeClaimResize"

// Resize is PersistentVolumeClaimResize. Shrinking is not its business: the registry
// refuses a request below status.capacity, and a request that does not grow passes here.
type Resize struct {
	admission.Ops
	reader admission.Reader
}

// NewResize returns PersistentVolumeClaimResize reading StorageClasses through r.
func NewResize(r admission.Reader) *Resize {
	return &Resize{Ops: admission.Ops{admission.Update}, reader: r}
}

var _ admission.Validator = (*Resize)(nil)

// Validate refuses an update that grows a claim's storage request unless the claim is
// Bound and its StorageClass (unchanged by the update) has allowVolumeExpansion, with
// upstream's messages.
func (r *Resize) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil
	}
	if old.Status.Phase != corev1.ClaimBound {
		return admission.NewForbidden(a, fmt.Errorf("Only bound persistent volume claims can be expanded"))
	}
	allowed, err := r.allowsExpansion(ctx, claimClass(pvc), claimClass(old))
	if err != nil {
		return err
	}
	if !allowed {
		return admission.NewForbidden(a, fmt.Errorf("only dynamically provisioned pvc can be resized and "+
			"the storageclass that provisions the pvc must support resize"))
	}
	return nil
}

// allowsExpansion says whether the claim's class, the same before and after, exists and
// has allowVolumeExpansion. Only a failure to read (not a missing class) is an error.
func (r *Resize) allowsExpansion(ctx context.Context, class, oldClass string) (bool, error) {
	if class == "" || class != oldClass {
		return false, nil
	}
	o, err := r.reader.Get(ctx, storageClassesGVR, "", class)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	sc := o.(*storagev1.StorageClass)
	return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion, nil
}

// claimClass is the claim's class as upstream reads it: the legacy beta annotation
// first, then spec.storageClassName.
func claimClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}
