package util

import "k8s.io/apimachinery/pkg/api/meta"

// TrimManagedFields is an informer transform that drops an object's managedFields
// before it is cached, as upstream's controller-manager does for its shared and
// metadata informers: no controller reads them, and an update sent without them
// keeps the stored ones. It returns obj itself (tombstones and objects without
// metadata unchanged).
func TrimManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil && acc.GetManagedFields() != nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}
