package fieldmanager

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
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

	lc, oc := reflect.New(lv.Elem().Type()), reflect.New(lv.Elem().Type())
	lc.Elem().Set(lv.Elem())
	oc.Elem().Set(ov.Elem())
	common, differ, ok := commonFields(validator, root.Map, lv.Elem(), ov.Elem(), true)
	if !ok {
		return nil, nil, false
	}
	pruned := len(common) > 0
	for _, i := range common {
		lc.Elem().Field(i).SetZero()
		oc.Elem().Field(i).SetZero()
	}
	// One level down, in the fields that changed (a status of which a heartbeat
	// changes the conditions only), the same.
	for _, i := range differ {
		if pruneCommonSubfields(validator, root.Map, lc.Elem().Type().Field(i), lc.Elem().Field(i), oc.Elem().Field(i)) {
			pruned = true
		}
	}
	if !pruned {
		return nil, nil, false
	}
	liveCopy, ok1 := lc.Interface().(runtime.Object)
	objCopy, ok2 := oc.Interface().(runtime.Object)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	return liveCopy, objCopy, true
}

// commonFields returns the indexes of the fields of struct values l and r (of one
// type, described by schema map t) that are deeply equal, set, and valid (checked
// once, on l), and of those set on both sides that differ; ok is false where the
// struct has an inline field, or a common field is not plainly valid. At the root,
// the type and object metadata are neither.
func commonFields(validator *goValidator, t *smdschema.Map, l, r reflect.Value, root bool) (common, differ []int, ok bool) {
	st := l.Type()
	for i := range st.NumField() {
		sf := st.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case root && (sf.Type == reflect.TypeFor[metav1.TypeMeta]() || name == "metadata"):
			continue
		case sf.Anonymous:
			return nil, nil, false // an inline struct: its fields are the object's
		case !sf.IsExported() || name == "" || name == "-":
			continue
		}
		lf, rf := l.Field(i), r.Field(i)
		if lf.IsZero() || rf.IsZero() {
			continue
		}
		if !reflect.DeepEqual(lf.Interface(), rf.Interface()) {
			differ = append(differ, i)
			continue
		}
		field, found := t.FindField(name)
		if !found || !validator.valid(field.Type, lf, value.TypeReflectEntryOf(sf.Type)) {
			return nil, nil, false
		}
		common = append(common, i)
	}
	return common, differ, true
}

// pruneCommonSubfields zeroes, in the copies l and r of a struct field sf of the
// root (schema map root) that differs, the fields they have equal, and reports
// whether it did. The struct stays on both sides as a map the comparison descends
// into (neither side is left empty, nor zero, which an omitzero tag would omit, to
// be found added or removed): each side keeps a field that is set and not omitted.
// Atomic structs, and types that convert themselves, are compared whole and left
// alone.
func pruneCommonSubfields(validator *goValidator, root *smdschema.Map, sf reflect.StructField, l, r reflect.Value) bool {
	if l.Kind() != reflect.Struct {
		return false
	}
	e := value.TypeReflectEntryOf(sf.Type)
	if e.CanConvertToUnstructured() {
		return false
	}
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	field, found := root.FindField(name)
	if !found {
		return false
	}
	atom, found := validator.schema.Resolve(field.Type)
	if !found || atom.Map == nil || atom.Map.ElementRelationship == smdschema.Atomic {
		return false
	}
	common, _, ok := commonFields(validator, atom.Map, l, r, false)
	if !ok || len(common) == 0 {
		return false
	}
	lc, rc := reflect.New(l.Type()).Elem(), reflect.New(l.Type()).Elem()
	lc.Set(l)
	rc.Set(r)
	for _, i := range common {
		lc.Field(i).SetZero()
		rc.Field(i).SetZero()
	}
	if !keepsAField(e, lc) || !keepsAField(e, rc) {
		return false
	}
	l.Set(lc)
	r.Set(rc)
	return true
}

// keepsAField reports whether struct v (of reflection entry e) has a field that is
// set and that the library's reflection does not omit.
func keepsAField(e *value.TypeReflectCacheEntry, v reflect.Value) bool {
	for _, f := range e.OrderedFields() {
		if fv := f.GetFrom(v); !fv.IsZero() && !f.CanOmit(fv) {
			return true
		}
	}
	return false
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
