package fieldmanager

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
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

// LibraryOnly leaves m's updates wholly to the library (set before m's first use):
// the tests' and benchmarks' baseline.
func (m *Managers) LibraryOnly() { m.libraryOnly = true }

// FastToTyped says whether m's type converter validates obj (of a kind it has seen)
// without the library.
func (m *Managers) FastToTyped(obj runtime.Object) bool {
	tc, _ := m.TypeConverter()
	fv, ok := tc.(*fastValidating)
	if !ok {
		return false
	}
	_, ok = fv.fastToTyped(obj, []typed.ValidationOptions{typed.AllowDuplicates})
	return ok
}

// UpdateAnswersFast says whether m's Update of live to obj (of a kind m has seen)
// validates both without the library and compares live without its managedFields.
func (m *Managers) UpdateAnswersFast(gvk schema.GroupVersionKind, live, obj runtime.Object) bool {
	if len(live.(interface {
		GetManagedFields() []metav1.ManagedFieldsEntry
	}).GetManagedFields()) > 0 {
		if stripped := withoutInertManagedFields(live); stripped == live {
			return false
		}
	}
	obj = obj.DeepCopyObject()
	obj.(interface {
		SetManagedFields([]metav1.ManagedFieldsEntry)
	}).SetManagedFields(nil)
	return m.FastToTyped(live) && m.FastToTyped(obj)
}

// ValidGoObject says whether the package's validation of obj, of a kind m has seen,
// answers that it is valid (false also where it declines).
func (m *Managers) ValidGoObject(obj runtime.Object) bool {
	tc, _ := m.TypeConverter()
	fv := tc.(*fastValidating)
	t, ok := fv.types.Load(obj.GetObjectKind().GroupVersionKind())
	if !ok {
		return false
	}
	pt := t.(*parsedType)
	return validGoObject(pt.schema, pt.typeRef, obj)
}

// ComparesWithoutCommonFields says whether m's Update of live to obj has the library
// compare them without the fields they have equal.
func (m *Managers) ComparesWithoutCommonFields(gvk schema.GroupVersionKind, live, obj runtime.Object) bool {
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	_, _, ok := m.withoutCommonFields(gvk, live, obj)
	return ok
}
