package fieldmanager

import (
	"reflect"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// walkReflect is walk over a Go object itself (rv, whose reflection entry is e) rather
// than over structured-merge-diff's reflective value of it: the same rules, the same
// sets, without wrapping every field in a value.Value (an allocation, a type switch and
// an interface call per node, which made most of a create's field tracking). It reads
// fields as the library's value reflection reads them (its own cache of JSON names,
// omitempty and inline fields, and each type's own conversion to unstructured where
// it has one), and hands a subtree to walk, as a value, wherever the library's
// treatment is more than a plain descent: types converting themselves (times,
// quantities, int-or-strings), atomic and empty maps and lists (validated whole),
// and a node the empty object types otherwise. It returns errNotCreateFast where it
// cannot decide (duplicate list items, a map keyed by anything but strings, an
// interface field), and the caller then walks the object as a value instead.
func (w *createWalker) walkReflect(tr schema.TypeRef, lhs value.Value, rv reflect.Value, e *value.TypeReflectCacheEntry) error {
	a, ok := w.schema.Resolve(tr)
	return w.walkResolved(tr, a, ok, lhs, rv, e)
}

// walkResolved is walkReflect with tr already resolved (a, resolved).
func (w *createWalker) walkResolved(tr schema.TypeRef, a schema.Atom, resolved bool, lhs value.Value, rv reflect.Value, e *value.TypeReflectCacheEntry) error {
	if e.CanConvertToUnstructured() {
		u, err := e.ToUnstructured(rv)
		if err != nil {
			return errNotCreateFast
		}
		return w.walk(tr, lhs, value.NewValueInterface(u))
	}
	rv, k, ok := reflectKind(rv)
	if !ok || !resolved {
		return errNotCreateFast
	}
	arhs := deduceAtomOfKind(a, k)
	if lhs != nil {
		if alhs := deduceAtom(a, lhs); !sameAtom(alhs, arhs) {
			return w.walkAsValue(tr, lhs, rv)
		}
	}
	var inLeaf bool
	var err error
	switch {
	case arhs.Map != nil:
		inLeaf, err = w.reflectMap(tr, arhs.Map, lhs, rv, k)
	case arhs.Scalar != nil:
		if !scalarKindValid(*arhs.Scalar, k) {
			return errNotCreateFast
		}
		// Added or modified: a create records both alike.
		if lhs == nil || !value.EqualsUsing(w.alloc, scalarValue(rv, k), lhs) {
			w.fields.insert(w.path)
		}
		inLeaf = true
	case arhs.List != nil:
		inLeaf, err = w.reflectList(tr, arhs.List, lhs, rv, k)
	default:
		return errNotCreateFast
	}
	if err != nil {
		return err
	}
	if !inLeaf && lhs == nil {
		w.fields.insert(w.path)
	}
	return nil
}

// walkAsValue hands rv's subtree to walk as the library's reflective value of it.
func (w *createWalker) walkAsValue(tr schema.TypeRef, lhs value.Value, rv reflect.Value) error {
	v, err := reflectValue(rv)
	if err != nil {
		return errNotCreateFast
	}
	return w.walk(tr, lhs, v)
}

// leafAsValue is wholeLeaf for rv: an atomic or empty map or list.
func (w *createWalker) leafAsValue(tr schema.TypeRef, lhs value.Value, rv reflect.Value) (bool, error) {
	v, err := reflectValue(rv)
	if err != nil {
		return false, errNotCreateFast
	}
	return w.wholeLeaf(tr, lhs, v, true)
}

// emptyLeaf is wholeLeaf for a null (k) or else empty map or list (list): there is
// nothing in it to validate.
func (w *createWalker) emptyLeaf(lhs value.Value, k reflectedKind, list bool) (bool, error) {
	var v value.Value
	switch {
	case lhs == nil:
	case k == kindNull:
		v = value.NewValueInterface(nil)
	case list:
		v = value.NewValueInterface([]interface{}{})
	default:
		v = value.NewValueInterface(map[string]interface{}{})
	}
	w.leaf(lhs, v)
	return true, nil
}

func (w *createWalker) reflectMap(tr schema.TypeRef, t *schema.Map, lhsV value.Value, rv reflect.Value, k reflectedKind) (bool, error) {
	var lhs value.Map
	if lhsV != nil && lhsV.IsMap() {
		lhs = lhsV.AsMapUsing(w.alloc)
		defer w.alloc.Free(lhs)
	}
	// A struct's emptiness (every field omitted) is found by walking it: see below.
	var rhsEmpty bool
	switch k {
	case kindStruct:
	case kindMap:
		if rv.Type().Key().Kind() != reflect.String {
			return false, errNotCreateFast
		}
		rhsEmpty = rv.Len() == 0
	case kindNull:
		rhsEmpty = true
	default:
		return false, errNotCreateFast
	}
	lhsEmpty := lhs == nil || lhs.Empty()
	if lhsEmpty && rhsEmpty {
		return w.emptyLeaf(lhsV, k, false)
	}
	if t.ElementRelationship == schema.Atomic {
		return w.leafAsValue(tr, lhsV, rv)
	}
	if k == kindNull {
		return false, nil
	}
	if k == kindStruct {
		return w.reflectStruct(t, lhs, lhsV, lhsEmpty, rv)
	}
	return false, w.reflectMapEntries(t, lhs, rv)
}

// reflectStruct visits a struct's fields that are not omitted, in the library's order.
func (w *createWalker) reflectStruct(t *schema.Map, lhs value.Map, lhsV value.Value, lhsEmpty bool, rv reflect.Value) (bool, error) {
	visited := 0
	fields := w.plans.of(w.schema, rv.Type(), t)
	for i := range fields {
		f := &fields[i]
		var fv reflect.Value
		if f.index >= 0 {
			fv = rv.Field(f.index)
		} else {
			fv = f.entry.GetFrom(rv)
		}
		if f.entry.CanOmit(fv) {
			continue
		}
		visited++
		if !f.declared {
			return false, errNotCreateFast // "field not declared in schema"
		}
		// The name lives in the library's reflection cache, which never changes it:
		// the path can point at it.
		if err := w.reflectField(&f.entry.JsonName, f.typ, f.atom, f.resolved, lhs, fv, f.entry.TypeEntry); err != nil {
			return false, err
		}
	}
	if visited == 0 && lhsEmpty {
		// An empty struct against nothing: one leaf, as the library promotes it
		// (nothing was recorded on the way).
		return w.emptyLeaf(lhsV, kindStruct, false)
	}
	return false, nil
}

var stringMapType = reflect.TypeFor[map[string]string]()

// reflectMapEntries visits the entries of a Go map with string keys.
func (w *createWalker) reflectMapEntries(t *schema.Map, lhs value.Map, rv reflect.Value) error {
	if lhs == nil && rv.Type() == stringMapType && len(t.Fields) == 0 {
		if a, ok := w.schema.Resolve(t.ElementType); ok && a.Scalar != nil && scalarKindValid(*a.Scalar, kindString) {
			// Labels and the like: every entry is a scalar leaf the empty object lacks,
			// recorded as walkResolved would record it, without a reflective value per
			// key and entry. The keys are copied once: the paths point at them.
			m := rv.Interface().(map[string]string)
			keys := make([]string, 0, len(m))
			for key := range m {
				keys = append(keys, key)
			}
			for i := range keys {
				w.path = append(w.path, fieldpath.PathElement{FieldName: &keys[i]})
				w.fields.insert(w.path)
				w.path = w.path[:len(w.path)-1]
			}
			return nil
		}
	}
	elem := value.TypeReflectEntryOf(rv.Type().Elem())
	for it := rv.MapRange(); it.Next(); {
		key := it.Key().String()
		fieldType := t.ElementType
		if sf, ok := t.FindField(key); ok {
			fieldType = sf.Type
		} else if (t.ElementType == schema.TypeRef{}) {
			return errNotCreateFast // "field not declared in schema"
		}
		a, resolved := w.schema.Resolve(fieldType)
		if err := w.reflectField(&key, fieldType, a, resolved, lhs, it.Value(), elem); err != nil {
			return err
		}
	}
	return nil
}

// reflectField walks the field or entry *name (fv, of schema type tr resolved as a)
// against the empty object's field of that name in lhs, if any.
func (w *createWalker) reflectField(name *string, tr schema.TypeRef, a schema.Atom, resolved bool, lhs value.Map, fv reflect.Value, e *value.TypeReflectCacheEntry) error {
	var lhsItem value.Value
	if lhs != nil {
		if v, ok := lhs.GetUsing(w.alloc, *name); ok {
			lhsItem = v
			defer w.alloc.Free(v)
		}
	}
	w.path = append(w.path, fieldpath.PathElement{FieldName: name})
	err := w.walkResolved(tr, a, resolved, lhsItem, fv, e)
	w.path = w.path[:len(w.path)-1]
	return err
}

func (w *createWalker) reflectList(tr schema.TypeRef, t *schema.List, lhsV value.Value, rv reflect.Value, k reflectedKind) (bool, error) {
	lhsLen := 0
	if lhsV != nil && lhsV.IsList() {
		l := lhsV.AsListUsing(w.alloc)
		lhsLen = l.Length()
		w.alloc.Free(l)
	}
	if lhsLen > 0 {
		// The empty object's items would need pairing with these (emptyValue keeps
		// no such kind on the fast path).
		return false, errNotCreateFast
	}
	var n int
	switch k {
	case kindList:
		n = rv.Len()
	case kindNull:
	default:
		return false, errNotCreateFast
	}
	if n == 0 {
		return w.emptyLeaf(lhsV, k, true)
	}
	if t.ElementRelationship == schema.Atomic {
		return w.leafAsValue(tr, lhsV, rv)
	}
	elem := value.TypeReflectEntryOf(rv.Type().Elem())
	pes := make([]fieldpath.PathElement, n)
	for i := range n {
		pe, err := w.reflectItemElement(t, rv.Index(i), elem)
		if err != nil {
			return false, errNotCreateFast
		}
		pes[i] = pe
	}
	if hasDuplicates(pes) {
		return false, errNotCreateFast
	}
	for i, pe := range pes {
		w.path = append(w.path, pe)
		err := w.walkReflect(t.ElementType, nil, rv.Index(i), elem)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// hasDuplicates reports whether two items of a list have the same path element.
func hasDuplicates(pes []fieldpath.PathElement) bool {
	if len(pes) < 16 {
		for i := range pes {
			for j := i + 1; j < len(pes); j++ {
				if pes[i].Equals(pes[j]) {
					return true
				}
			}
		}
		return false
	}
	seen := fieldpath.MakePathElementSet(len(pes))
	for _, pe := range pes {
		if seen.Has(pe) {
			return true
		}
		seen.Insert(pe)
	}
	return false
}

// reflectItemElement is listItemToPathElement for a Go list item.
func (w *createWalker) reflectItemElement(list *schema.List, item reflect.Value, e *value.TypeReflectCacheEntry) (fieldpath.PathElement, error) {
	pe := fieldpath.PathElement{}
	if list.ElementRelationship != schema.Associative {
		return pe, errNotCreateFast
	}
	if len(list.Keys) == 0 {
		v, err := reflectScalar(item, e)
		if err != nil || v.IsMap() || v.IsList() || v.IsNull() {
			return pe, errNotCreateFast
		}
		pe.Value = &v
		return pe, nil
	}
	if e.CanConvertToUnstructured() {
		return pe, errNotCreateFast
	}
	item, k, ok := reflectKind(item)
	if !ok || k != kindStruct {
		return pe, errNotCreateFast
	}
	fields := value.TypeReflectEntryOf(item.Type()).Fields()
	keyMap := make(value.FieldList, 0, len(list.Keys))
	for _, name := range list.Keys {
		if f, ok := fields[name]; ok {
			if fv := f.GetFrom(item); !f.CanOmit(fv) {
				v, err := reflectScalar(fv, f.TypeEntry)
				if err != nil {
					return pe, err
				}
				keyMap = append(keyMap, value.Field{Name: name, Value: v})
				continue
			}
		}
		atom, ok := w.schema.Resolve(list.ElementType)
		if !ok || atom.Map == nil {
			return pe, errNotCreateFast
		}
		if field, _ := atom.Map.FindField(name); field.Default != nil {
			keyMap = append(keyMap, value.Field{Name: name, Value: value.NewValueInterface(field.Default)})
		}
	}
	if len(keyMap) == 0 {
		return pe, errNotCreateFast
	}
	keyMap.Sort()
	pe.Key = &keyMap
	return pe, nil
}

// reflectedKind is what the library's value reflection makes of a Go value.
type reflectedKind int

const (
	kindNull reflectedKind = iota
	kindStruct
	kindMap
	kindList
	kindInt
	kindUint
	kindFloat
	kindString
	kindBytes
	kindBool
)

// reflectKind dereferences rv once, as the library's value reflection does, and says
// what it is; ok is false for what the library would not take (a pointer to a
// pointer, a channel).
func reflectKind(rv reflect.Value) (reflect.Value, reflectedKind, bool) {
	if k := rv.Kind(); k == reflect.Interface || k == reflect.Ptr {
		if rv.IsNil() {
			return rv, kindNull, true
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		if rv.IsNil() {
			return rv, kindNull, true
		}
		return rv, kindMap, true
	case reflect.Struct:
		return rv, kindStruct, true
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
		return rv, kindInt, true
	case reflect.Uint, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		return rv, kindUint, true
	case reflect.Float64, reflect.Float32:
		return rv, kindFloat, true
	case reflect.String:
		return rv, kindString, true
	case reflect.Bool:
		return rv, kindBool, true
	case reflect.Slice:
		if rv.IsNil() {
			return rv, kindNull, true
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return rv, kindBytes, true
		}
		return rv, kindList, true
	}
	return rv, kindNull, false
}

// sameAtom is a.Equals(&b), without comparing the schema's types field by field where
// both are the same types (the common case: both deduced from one atom).
func sameAtom(a, b schema.Atom) bool {
	if a.Map == b.Map && a.List == b.List && a.Scalar == b.Scalar {
		return true
	}
	return a.Equals(&b)
}

// deduceAtomOfKind is deduceAtom for a value of kind k.
func deduceAtomOfKind(atom schema.Atom, k reflectedKind) schema.Atom {
	switch k {
	case kindInt, kindUint, kindFloat, kindString, kindBytes, kindBool:
		if atom.Scalar != nil {
			return schema.Atom{Scalar: atom.Scalar}
		}
	case kindList:
		if atom.List != nil {
			return schema.Atom{List: atom.List}
		}
	case kindStruct, kindMap:
		if atom.Map != nil {
			return schema.Atom{Map: atom.Map}
		}
	}
	return atom
}

// scalarKindValid is scalarValid for a value of kind k.
func scalarKindValid(t schema.Scalar, k reflectedKind) bool {
	switch k {
	case kindNull:
		return true
	case kindInt, kindUint, kindFloat:
		return t == schema.Numeric || t == schema.Untyped
	case kindString, kindBytes:
		return t == schema.String || t == schema.Untyped
	case kindBool:
		return t == schema.Boolean || t == schema.Untyped
	}
	return false
}

// scalarValue is the value the library's reflection gives a scalar (or null) of kind k.
func scalarValue(rv reflect.Value, k reflectedKind) value.Value {
	switch k {
	case kindInt:
		return value.NewValueInterface(rv.Int())
	case kindUint:
		return value.NewValueInterface(int64(rv.Uint()))
	case kindFloat:
		return value.NewValueInterface(rv.Float())
	case kindString:
		return value.NewValueInterface(rv.String())
	case kindBool:
		return value.NewValueInterface(rv.Bool())
	}
	v, err := reflectValue(rv)
	if err != nil {
		return value.NewValueInterface(nil)
	}
	return v
}

// reflectScalar is the value of a set's item or a map list's key: a scalar, or what a
// type converting itself gives.
func reflectScalar(rv reflect.Value, e *value.TypeReflectCacheEntry) (value.Value, error) {
	if e.CanConvertToUnstructured() {
		u, err := e.ToUnstructured(rv)
		if err != nil {
			return nil, errNotCreateFast
		}
		return value.NewValueInterface(u), nil
	}
	rv, k, ok := reflectKind(rv)
	switch {
	case !ok:
		return nil, errNotCreateFast
	case k == kindNull:
		return value.NewValueInterface(nil), nil
	case k == kindStruct || k == kindMap || k == kindList:
		// A composite key is the library's to judge.
		return nil, errNotCreateFast
	}
	return scalarValue(rv, k), nil
}

// reflectValue is the library's reflective value of rv.
func reflectValue(rv reflect.Value) (value.Value, error) {
	if rv.Kind() == reflect.Ptr || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return value.NewValueInterface(nil), nil
		}
	}
	if rv.Kind() == reflect.Ptr {
		return value.NewValueReflect(rv.Interface())
	}
	if rv.CanAddr() {
		return value.NewValueReflect(rv.Addr().Interface())
	}
	p := reflect.New(rv.Type())
	p.Elem().Set(rv)
	return value.NewValueReflect(p.Interface())
}
