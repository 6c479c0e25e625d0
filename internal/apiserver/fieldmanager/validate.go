package fieldmanager

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// fastValidating is the library's type converter with a quicker validation of Go
// objects. Every update converts both the live and the new object to typed values,
// which validates each against the schema, and that validation, a walk over the
// library's reflective values (a value.Value allocated and type-switched per node),
// made about half of an update's field tracking. goValidator walks the Go struct
// itself, as the create walk does, by the validation's rules. Where it cannot decide
// (interface fields, composite list keys and the like) or says no, the library
// validates, so that the answer, error or not, is the library's.
type fastValidating struct {
	managedfields.TypeConverter
	// types maps a GroupVersionKind to its *parsedType, learnt from the library's
	// first conversion of an object of the kind.
	types sync.Map
}

type parsedType struct {
	schema  *smdschema.Schema
	typeRef smdschema.TypeRef
}

func (c *fastValidating) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if tv, ok := c.fastToTyped(obj, opts); ok {
		return tv, nil
	}
	tv, err := c.TypeConverter.ObjectToTyped(obj, opts...)
	if err == nil {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if _, known := c.types.Load(gvk); !known {
			c.types.Store(gvk, &parsedType{schema: tv.Schema(), typeRef: tv.TypeRef()})
		}
	}
	return tv, err
}

// fastToTyped is ObjectToTyped through goValidator; ok is false where the library
// must answer: options other than allowing duplicates (goValidator does not look for
// them), unstructured objects, kinds not yet seen, and whatever goValidator does not
// find valid.
func (c *fastValidating) fastToTyped(obj runtime.Object, opts []typed.ValidationOptions) (*typed.TypedValue, bool) {
	if len(opts) != 1 || opts[0] != typed.AllowDuplicates {
		return nil, false
	}
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return nil, false
	}
	t, ok := c.types.Load(obj.GetObjectKind().GroupVersionKind())
	if !ok {
		return nil, false
	}
	pt := t.(*parsedType)
	if !validGoObject(pt.schema, pt.typeRef, obj) {
		return nil, false
	}
	// What the library's FromStructured makes, validation aside.
	v, err := value.NewValueReflect(obj)
	if err != nil {
		return nil, false
	}
	return typed.AsTypedUnvalidated(v, pt.schema, pt.typeRef), true
}

// validGoObject reports whether obj is valid for the schema at tr, duplicates
// allowed, as typed.AsTyped finds it; false also where the walk cannot tell.
func validGoObject(s *smdschema.Schema, tr smdschema.TypeRef, obj runtime.Object) bool {
	alloc := allocators.Get().(value.Allocator)
	defer allocators.Put(alloc)
	v := &goValidator{schema: s, alloc: alloc}
	rv := reflect.ValueOf(obj)
	return v.valid(tr, rv, value.TypeReflectEntryOf(rv.Type()))
}

// goValidator is structured-merge-diff's validatingObjectWalker over a Go value as
// the library's value reflection reads it (the create walk's reading: reflectKind,
// the reflection cache's fields, types converting themselves), rule for rule; it
// answers false wherever it is unsure, and the library then validates.
type goValidator struct {
	schema *smdschema.Schema
	alloc  value.Allocator
	// w lends the create walk's reading of list keys.
	w createWalker
}

func (v *goValidator) valid(tr smdschema.TypeRef, rv reflect.Value, e *value.TypeReflectCacheEntry) bool {
	if stringConverters[rv.Type()] {
		// Null or a string, whichever: a string schema takes both, and the
		// conversion (formatting a time, a quantity) need not be made.
		if a, ok := v.schema.Resolve(tr); ok && a.Scalar != nil && (*a.Scalar == smdschema.String || *a.Scalar == smdschema.Untyped) {
			return true
		}
	}
	if e.CanConvertToUnstructured() {
		u, err := e.ToUnstructured(rv)
		if err != nil {
			return false
		}
		return v.validValue(tr, value.NewValueInterface(u))
	}
	rv, k, ok := reflectKind(rv)
	if !ok {
		return false
	}
	a, ok := v.schema.Resolve(tr)
	if !ok {
		return false
	}
	a = deduceAtomOfKind(a, k)
	switch {
	case a.Map != nil:
		return v.validMap(a.Map, rv, k)
	case a.Scalar != nil:
		return scalarKindValid(*a.Scalar, k)
	case a.List != nil:
		return v.validList(a.List, rv, k)
	}
	return false
}

// stringConverters are the types whose conversion to unstructured always gives null
// or a string, never an error.
var stringConverters = map[reflect.Type]bool{
	reflect.TypeFor[metav1.Time]():        true,
	reflect.TypeFor[*metav1.Time]():       true,
	reflect.TypeFor[metav1.MicroTime]():   true,
	reflect.TypeFor[*metav1.MicroTime]():  true,
	reflect.TypeFor[resource.Quantity]():  true,
	reflect.TypeFor[*resource.Quantity](): true,
}

// validValue validates a value the Go object converted itself to: a scalar or null
// here, anything else by the library.
func (v *goValidator) validValue(tr smdschema.TypeRef, val value.Value) bool {
	if val.IsNull() || val.IsFloat() || val.IsInt() || val.IsString() || val.IsBool() {
		a, ok := v.schema.Resolve(tr)
		if !ok {
			return false
		}
		a = deduceAtom(a, val)
		switch {
		case a.Map != nil, a.List != nil:
			return val.IsNull()
		case a.Scalar != nil:
			return scalarValid(*a.Scalar, val)
		}
		return false
	}
	_, err := typed.AsTyped(val, v.schema, tr, typed.AllowDuplicates)
	return err == nil
}

func (v *goValidator) validMap(t *smdschema.Map, rv reflect.Value, k reflectedKind) bool {
	field := func(key string, fv reflect.Value, fe *value.TypeReflectCacheEntry) bool {
		fieldType := t.ElementType
		if sf, ok := t.FindField(key); ok {
			fieldType = sf.Type
		} else if (t.ElementType == smdschema.TypeRef{}) {
			return false // "field not declared in schema"
		}
		return v.valid(fieldType, fv, fe)
	}
	switch k {
	case kindNull:
		return true
	case kindStruct:
		for _, f := range value.TypeReflectEntryOf(rv.Type()).OrderedFields() {
			fv := f.GetFrom(rv)
			if f.CanOmit(fv) {
				continue
			}
			if !field(f.JsonName, fv, f.TypeEntry) {
				return false
			}
		}
		return true
	case kindMap:
		if rv.Type().Key().Kind() != reflect.String {
			return false
		}
		elem := value.TypeReflectEntryOf(rv.Type().Elem())
		for it := rv.MapRange(); it.Next(); {
			if !field(it.Key().String(), it.Value(), elem) {
				return false
			}
		}
		return true
	}
	return false
}

func (v *goValidator) validList(t *smdschema.List, rv reflect.Value, k reflectedKind) bool {
	switch k {
	case kindNull:
		return true
	case kindList:
	default:
		return false
	}
	elem := value.TypeReflectEntryOf(rv.Type().Elem())
	for i := range rv.Len() {
		item := rv.Index(i)
		if t.ElementRelationship == smdschema.Associative {
			// Duplicates are allowed: the key need only be readable.
			v.w.schema, v.w.alloc = v.schema, v.alloc
			if _, err := v.w.reflectItemElement(t, item, elem); err != nil {
				return false
			}
		}
		if !v.valid(t.ElementType, item, elem) {
			return false
		}
	}
	return true
}
