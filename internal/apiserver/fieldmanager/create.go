package fieldmanager

import (
	"reflect"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Create records manager (operation Update) as the owner of everything a new object
// sets, as Update(gvk, "", empty, obj, manager) does, where empty is the new empty
// object of the kind the caller made (live), and returns obj with its managedFields
// set. It gives the same managedFields as Update, byte for byte but for the entry's
// time, in one walk over the object instead of the library's three (converting it to
// a typed value validates it; comparing it with the empty object walks both), and
// takes the library's path whenever its shortcut does not apply.
func (m *Managers) Create(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string) runtime.Object {
	if out, ok := m.createFast(gvk, live, obj, manager); ok {
		return out
	}
	return m.Update(gvk, "", live, obj, manager)
}

// stripped are the fields no managedFields entry lists (the library's stripMetaManager).
var stripped = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

var allocators = sync.Pool{New: func() any { return value.NewFreelistAllocator() }}

// createFast is Create's one walk; ok is false where the library's path must decide:
// the object or the empty one carries managedFields (a client may set them, which the
// library then merges), the manager name is not valid UTF-8 (the library's JSON
// round trip of the name would change it), a conversion fails, or the walk meets
// anything the library's validation or comparison treats other than plainly.
func (m *Managers) createFast(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string) (runtime.Object, bool) {
	return m.createWalk(gvk, live, obj, manager, walkGoOrValue)
}

// createWalks says which of the create walks createWalk may take.
type createWalks int

const (
	walkGoOrValue createWalks = iota // the Go object's own walk; if it declines, the value walk
	walkGoOnly                       // the tests': only the Go object's walk
	walkValueOnly                    // the tests': only the value walk
)

// createWalk is createFast with the walks it may take.
func (m *Managers) createWalk(gvk schema.GroupVersionKind, live, obj runtime.Object, manager string, walks createWalks) (runtime.Object, bool) {
	if !utf8.ValidString(manager) {
		return nil, false
	}
	acc, err := meta.Accessor(obj)
	if err != nil || len(acc.GetManagedFields()) != 0 {
		return nil, false
	}
	liveAcc, err := meta.Accessor(live)
	if err != nil || len(liveAcc.GetManagedFields()) != 0 || liveAcc.GetUID() != "" {
		return nil, false
	}
	tc, convertor, err := m.converters(gvk)
	if err != nil {
		return nil, false
	}
	empty, err := m.emptyValue(gvk, tc, convertor, live)
	if err != nil || empty.value == nil {
		return nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	gv := gvk.GroupVersion()
	newVersioned, err := convertor.ConvertToVersion(obj, gv)
	if err != nil {
		return nil, false
	}
	alloc := allocators.Get().(value.Allocator)
	defer allocators.Put(alloc)
	fields := newFieldTree()
	defer fields.release()
	w := &createWalker{schema: empty.schema, alloc: alloc, fields: fields, plans: &empty.plans}
	u, isUnstructured := newVersioned.(*unstructured.Unstructured)
	walked := false
	if isUnstructured && walks == walkGoOnly {
		return nil, false
	}
	if !isUnstructured && walks != walkValueOnly {
		rv := reflect.ValueOf(newVersioned)
		walked = w.walkReflect(empty.typeRef, empty.value, rv, value.TypeReflectEntryOf(rv.Type())) == nil
		if !walked {
			if walks == walkGoOnly {
				return nil, false
			}
			w.path = w.path[:0]
			fields.reset()
		}
	}
	if !walked {
		var newValue value.Value
		if isUnstructured {
			newValue = value.NewValueInterface(u.UnstructuredContent())
		} else if newValue, err = value.NewValueReflect(newVersioned); err != nil {
			return nil, false
		}
		if err := w.walk(empty.typeRef, empty.value, newValue); err != nil {
			return nil, false
		}
	}

	// What merge.Updater.Update and the managers around it do with the comparison
	// of a create: the union of the added and modified sets with the reset fields
	// filtered out (status, for kinds with one: the only filter of a main-resource
	// write) and the identity fields stripped, no entry when nothing is left; the
	// tree writes that set's JSON directly.
	excluded := ""
	if m.resetsStatus(gvk) {
		excluded = "status"
	}
	raw, err := fields.toJSON(excluded, stripped)
	if err != nil {
		return nil, false
	}
	acc.SetManagedFields(nil)
	if raw == nil {
		return obj, true
	}
	if manager == "" {
		manager = "unknown"
	}
	acc.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: gv.String(),
		Time:       &metav1.Time{Time: time.Now().UTC()},
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: raw},
	}})
	return obj, true
}

// emptyKind is the typed value of a kind's empty object, kept per kind: every create
// compares against it.
type emptyKind struct {
	tc      typeConverter // the converter it was made with
	schema  *smdschema.Schema
	typeRef smdschema.TypeRef
	value   value.Value // nil: the fast path does not apply to the kind
	plans   fieldPlans  // the walk's plans of the kind's struct types
}

// emptyValue returns the kind's empty object (live, the first time) as a typed value,
// made as the library makes it (converted to the kind's version and validated), and
// kept as plain data so that no caller's object is shared. It is nil where the walk
// could not skip what only the empty object has (a list with items).
func (m *Managers) emptyValue(gvk schema.GroupVersionKind, tc typeConverter, convertor runtime.ObjectConvertor, live runtime.Object) (*emptyKind, error) {
	if e, ok := m.empties.Load(gvk); ok && e.(*emptyKind).tc == tc {
		return e.(*emptyKind), nil
	}
	liveVersioned, err := convertor.ConvertToVersion(live, gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	typedEmpty, err := tc.ObjectToTyped(liveVersioned, typed.AllowDuplicates)
	if err != nil {
		return nil, err
	}
	e := &emptyKind{tc: tc, schema: typedEmpty.Schema(), typeRef: typedEmpty.TypeRef()}
	if v := typedEmpty.AsValue(); !hasItems(v) {
		e.value = value.NewValueInterface(v.Unstructured())
	}
	m.empties.Store(gvk, e)
	return e, nil
}

type typeConverter interface {
	ObjectToTyped(runtime.Object, ...typed.ValidationOptions) (*typed.TypedValue, error)
}

// converters returns the type converter and object convertor the kind's field
// manager is built with.
func (m *Managers) converters(gvk schema.GroupVersionKind) (typeConverter, runtime.ObjectConvertor, error) {
	if ck := m.customKind(gvk); ck != nil {
		return ck.tc, customConvertor{m.convertor, ck}, nil
	}
	tc, err := m.TypeConverter()
	if err != nil {
		return nil, nil, err
	}
	return tc, m.convertor, nil
}

// hasItems reports whether v holds a non-empty list anywhere: the walk skips what only
// the empty object has, which is right unless a list there could fail the comparison.
func hasItems(v value.Value) bool {
	switch {
	case v == nil:
	case v.IsList():
		return v.AsList().Length() > 0
	case v.IsMap():
		found := false
		v.AsMap().Iterate(func(_ string, item value.Value) bool {
			found = hasItems(item)
			return !found
		})
		return found
	}
	return false
}
