package util

import (
	"log/slog"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// controllerIndex indexes objects by "<namespace>/<controller UID>", and orphans by
// "<namespace>/", so a controller looks at its own objects and the adoptable ones
// instead of every object of the namespace.
const controllerIndex = "mizzen.controller-uid"

func controllerIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	ref := metav1.GetControllerOf(m)
	if ref == nil {
		return []string{m.GetNamespace() + "/"}, nil
	}
	return []string{m.GetNamespace() + "/" + string(ref.UID)}, nil
}

// IndexByController adds the controller index to a shared informer unless a controller
// sharing the informer already did. Should that fail, ControlledOrOrphans falls back to
// scanning the namespace.
func IndexByController(inf cache.SharedIndexInformer) {
	if _, ok := inf.GetIndexer().GetIndexers()[controllerIndex]; ok {
		return
	}
	if err := inf.AddIndexers(cache.Indexers{controllerIndex: controllerIndexFunc}); err != nil {
		slog.Warn("cannot index objects by controller; controllers will scan namespaces", "err", err)
	}
}

// ControlledOrOrphans lists the objects in namespace ns whose controller has uid, and
// the namespace's objects without a controller.
func ControlledOrOrphans[T any](inf cache.SharedIndexInformer, ns string, uid types.UID) ([]T, error) {
	var out []T
	if _, ok := inf.GetIndexer().GetIndexers()[controllerIndex]; !ok {
		err := cache.ListAllByNamespace(inf.GetIndexer(), ns, labels.Everything(), func(o any) {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		})
		return out, err
	}
	for _, key := range []string{ns + "/" + string(uid), ns + "/"} {
		objs, err := inf.GetIndexer().ByIndex(controllerIndex, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		}
	}
	return out, nil
}
