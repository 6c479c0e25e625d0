package apiserver

import (
	"fmt"
	"reflect"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"

	"mizzen/internal/storage"
)

// key is the etcd key of an object.
func (h *resourceHandler) key(namespace, name string) string {
	if h.Namespaced {
		return storage.Prefix + h.segment + "/" + namespace + "/" + name
	}
	return storage.Prefix + h.segment + "/" + name
}

// listPrefix is the etcd key prefix of a namespace's objects (all when namespace is "").
func (h *resourceHandler) listPrefix(namespace string) string {
	if h.Namespaced && namespace != "" {
		return storage.Prefix + h.segment + "/" + namespace + "/"
	}
	return storage.Prefix + h.segment + "/"
}

func (h *resourceHandler) converted() bool { return h.FromStorage != nil }

// present turns a stored object into the served version. Objects shared with the cache
// are never modified: a conversion makes a new object, and the cache already stamps the
// storage kind.
func (h *resourceHandler) present(obj runtime.Object) (runtime.Object, error) {
	if h.FromStorage != nil {
		out, err := h.FromStorage(obj)
		if err != nil {
			return nil, err
		}
		out.GetObjectKind().SetGroupVersionKind(h.GroupVersionKind())
		return out, nil
	}
	if obj.GetObjectKind().GroupVersionKind() != h.GroupVersionKind() {
		obj.GetObjectKind().SetGroupVersionKind(h.GroupVersionKind())
	}
	return obj, nil
}

// presentEntry is a cache entry's object in the served version.
func (h *resourceHandler) presentEntry(e *storage.Entry) (runtime.Object, error) {
	obj, err := e.Object()
	if err != nil {
		return nil, err
	}
	return h.present(obj)
}

// toStorage turns a served object into the stored type.
func (h *resourceHandler) toStorage(obj runtime.Object) (runtime.Object, error) {
	if h.ToStorage != nil {
		return h.ToStorage(obj)
	}
	return obj, nil
}

// structField returns the named top-level field of a typed object, if it has one.
func structField(obj runtime.Object, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	return f, f.IsValid() && f.CanSet()
}

func hasSpec(obj runtime.Object) bool {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return true // custom resources always have a generation
	}
	_, ok := structField(obj, "Spec")
	return ok
}

// copyField sets dst.name to src.name (both of the same type). For custom resources
// (unstructured) "Status" is the status field.
func copyField(dst, src runtime.Object, name string) {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su, _ := src.(*unstructured.Unstructured)
		if name != "Status" || su == nil {
			return
		}
		if st, found := su.Object["status"]; found {
			du.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(du.Object, "status")
		}
		return
	}
	d, ok1 := structField(dst, name)
	s, ok2 := structField(src, name)
	if ok1 && ok2 {
		d.Set(s)
	}
}

func fieldChanged(a, b runtime.Object, name string) bool {
	if ua, ok := a.(*unstructured.Unstructured); ok {
		// A custom resource's "spec" is everything but its metadata and status, as
		// upstream bumps a custom resource's generation.
		ub, _ := b.(*unstructured.Unstructured)
		if name != "Spec" || ub == nil {
			return false
		}
		strip := func(m map[string]interface{}) map[string]interface{} {
			out := make(map[string]interface{}, len(m))
			for k, v := range m {
				if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
					out[k] = v
				}
			}
			return out
		}
		return !equality.Semantic.DeepEqual(strip(ua.Object), strip(ub.Object))
	}
	fa, ok1 := structField(a, name)
	fb, ok2 := structField(b, name)
	if !ok1 || !ok2 {
		return false
	}
	return !equality.Semantic.DeepEqual(fa.Interface(), fb.Interface())
}

// prepareCreateMeta sets the system fields of a new object.
func prepareCreateMeta(acc metav1.Object, obj runtime.Object, now time.Time) {
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(generateName(acc.GetGenerateName()))
	}
	acc.SetUID(uuid.NewUUID())
	acc.SetCreationTimestamp(metav1.NewTime(now))
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetSelfLink("")
	acc.SetGeneration(0)
	if hasSpec(obj) {
		acc.SetGeneration(1)
	}
}

// generateName appends five random characters to a prefix, as upstream does, keeping
// the result within the 63 characters most names allow.
func generateName(prefix string) string {
	const maxPrefix = 63 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + rand.String(5)
}

// prepareUpdateMeta carries the system fields of the stored object into an update. A
// changed spec bumps the generation when specBumpsGeneration; it is false for writes
// whose generation upstream never bumps, so their spec need not be compared: those
// that keep the stored spec (the status subresources) and a binding, which sets
// spec.nodeName.
func prepareUpdateMeta(acc, old metav1.Object, obj, oldObj runtime.Object, specBumpsGeneration bool) {
	if acc.GetUID() == "" {
		acc.SetUID(old.GetUID())
	}
	acc.SetCreationTimestamp(old.GetCreationTimestamp())
	acc.SetDeletionTimestamp(old.GetDeletionTimestamp())
	acc.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	acc.SetSelfLink("")
	acc.SetGeneration(old.GetGeneration())
	if specBumpsGeneration && hasSpec(obj) && fieldChanged(obj, oldObj, "Spec") {
		acc.SetGeneration(old.GetGeneration() + 1)
	}
}

func accessor(obj runtime.Object) metav1.Object {
	acc, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("object %T has no metadata: %v", obj, err))
	}
	return acc
}

func parseRV(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv < 0 {
		return 0, fmt.Errorf("invalid resource version %q", s)
	}
	return rv, nil
}
