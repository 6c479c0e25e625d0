package fieldmanager

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CreateFast exposes Create's one-walk path to the tests, which compare it with the
// library's.
func (m *Managers) CreateFast(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string) (runtime.Object, bool) {
	return m.createFast(gvk, live, obj, manager)
}

// CreateGoWalk is CreateFast through the Go object's walk only (ok false where it
// declines), and CreateValueWalk through the value walk only.
func (m *Managers) CreateGoWalk(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string) (runtime.Object, bool) {
	return m.createWalk(gvk, live, obj, manager, walkGoOnly)
}

func (m *Managers) CreateValueWalk(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string) (runtime.Object, bool) {
	return m.createWalk(gvk, live, obj, manager, walkValueOnly)
}
