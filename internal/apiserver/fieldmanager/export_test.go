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
