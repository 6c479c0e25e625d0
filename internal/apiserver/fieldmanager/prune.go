package fieldmanager

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// withoutCommonFields returns shallow copies of live and obj without the top-level
// fields (spec, status, data...) they have equal, for the library to compare in
// their place; ok is false where the library must have the objects themselves.
//
// A status write leaves the spec as it was, a write to the object itself leaves the
// status: the library's comparison walks the unchanged half of both objects, and
// validates it twice, to find nothing there. A field equal on both sides adds
// nothing to the comparison's sets (its pairs of values are all equal, and a
// comparison of valid values does not fail), and the reconciliation of manager sets
// with the schema reads the schema only; what the field does contribute is its
// validity, which is checked here, once, as the library would check it (a field
// that is not plainly valid keeps the objects whole). Metadata stays: the library
// reads the managed fields, the uid and the rest from it.
//
// It applies to typed objects of the kind's own version only, whose managers all
// record that version (comparisons at other versions convert the objects, which is
// the library's business).
func (m *Managers) withoutCommonFields(gvk schema.GroupVersionKind, live, obj runtime.Object) (runtime.Object, runtime.Object, bool) {
	tc, err := m.TypeConverter()
	if err != nil {
		return nil, nil, false
	}
	fv, ok := tc.(*fastValidating)
	if !ok {
		return nil, nil, false
	}
	t, ok := fv.types.Load(gvk)
	if !ok {
		return nil, nil, false
	}
	pt := t.(*parsedType)
	gv := gvk.GroupVersion()
	for _, o := range []runtime.Object{live, obj} {
		// The library's first step; an object it would convert is not ours.
		if converted, err := m.convertor.ConvertToVersion(o, gv); err != nil || converted != o {
			return nil, nil, false
		}
	}
	if !sameVersionManagers(live, gv) || !sameVersionManagers(obj, gv) {
		return nil, nil, false
	}
	lv, ov := reflect.ValueOf(live), reflect.ValueOf(obj)
	if lv.Type() != ov.Type() || lv.Kind() != reflect.Ptr || lv.IsNil() || ov.IsNil() || lv.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	root, ok := pt.schema.Resolve(pt.typeRef)
	if !ok || root.Map == nil {
		return nil, nil, false
	}
	alloc := allocators.Get().(value.Allocator)
	defer allocators.Put(alloc)
	validator := &goValidator{schema: pt.schema, alloc: alloc}

	st := lv.Elem().Type()
	var common []int
	for i := range st.NumField() {
		sf := st.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case sf.Type == reflect.TypeFor[metav1.TypeMeta](), name == "metadata":
			continue
		case sf.Anonymous:
			return nil, nil, false // an inline struct: its fields are the object's
		case !sf.IsExported() || name == "" || name == "-":
			continue
		}
		lf, of := lv.Elem().Field(i), ov.Elem().Field(i)
		if lf.IsZero() || !reflect.DeepEqual(lf.Interface(), of.Interface()) {
			continue
		}
		field, ok := root.Map.FindField(name)
		if !ok || !validator.valid(field.Type, lf, value.TypeReflectEntryOf(sf.Type)) {
			return nil, nil, false
		}
		common = append(common, i)
	}
	if len(common) == 0 {
		return nil, nil, false
	}
	lc, oc := reflect.New(st), reflect.New(st)
	lc.Elem().Set(lv.Elem())
	oc.Elem().Set(ov.Elem())
	for _, i := range common {
		lc.Elem().Field(i).SetZero()
		oc.Elem().Field(i).SetZero()
	}
	liveCopy, ok1 := lc.Interface().(runtime.Object)
	objCopy, ok2 := oc.Interface().(runtime.Object)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	return liveCopy, objCopy, true
}

// sameVersionManagers reports whether every managedFields entry of obj records gv.
func sameVersionManagers(obj runtime.Object, gv schema.GroupVersion) bool {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	version := gv.String()
	for _, e := range acc.GetManagedFields() {
		if e.APIVersion != version {
			return false
		}
	}
	return true
}
