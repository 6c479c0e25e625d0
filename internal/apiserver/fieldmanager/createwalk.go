package fieldmanager

import (
	"errors"
	"fmt"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// errNotCreateFast says the one-walk computation of a create's fields met something
// the library's path treats differently (a value its validation rejects, a list its
// comparison cannot index): the caller then takes the library's path, which gives the
// library's answer, error or not.
var errNotCreateFast = errors.New("not for the create fast path")

// createWalker computes, in one walk over a new object, what the library computes in
// two: typed.AsTyped's validation of the object (duplicates allowed) and
// TypedValue.Compare of the empty object of its kind against it, of which a create
// needs only the union of the Added and Modified sets. It follows structured-merge-diff's
// compareWalker rule for rule; the empty object's value (lhs) is small and nil below
// its few fields, and where it is nil the walk is a plain descent of the new object.
type createWalker struct {
	schema *schema.Schema
	alloc  value.Allocator
	path   fieldpath.Path
	fields *fieldTree // what Added and Modified would hold, together
	plans  *fieldPlans
}

// walk compares lhs (the empty object's value here, or nil) with rhs (never nil) of
// type tr at w.path.
func (w *createWalker) walk(tr schema.TypeRef, lhs, rhs value.Value) error {
	a, ok := w.schema.Resolve(tr)
	if !ok {
		return errNotCreateFast
	}
	arhs := deduceAtom(a, rhs)
	alhs := deduceAtom(a, lhs)
	var inLeaf bool
	var err error
	if lhs == nil || sameAtom(alhs, arhs) {
		inLeaf, err = w.handle(tr, arhs, lhs, rhs, true)
	} else {
		// compareWalker handles the empty object's atom first, with a copy of itself
		// (so its leaf state does not carry over), then the new object's.
		if _, err = w.handle(tr, alhs, lhs, rhs, false); err != nil {
			return err
		}
		inLeaf, err = w.handle(tr, arhs, lhs, rhs, true)
	}
	if err != nil {
		return err
	}
	if !inLeaf && lhs == nil {
		w.fields.insert(w.path)
	}
	return nil
}

// handle is handleAtom: the node as atom a. validate says rhs must be validated
// against a (it is rhs's own deduced atom); it reports whether the node became a leaf.
func (w *createWalker) handle(tr schema.TypeRef, a schema.Atom, lhs, rhs value.Value, validate bool) (bool, error) {
	switch {
	case a.Map != nil:
		return w.doMap(tr, a.Map, lhs, rhs, validate)
	case a.Scalar != nil:
		if validate && !scalarValid(*a.Scalar, rhs) {
			return false, errNotCreateFast
		}
		// compareWalker.doScalar fails only if both sides fail; lhs is the
		// empty object, which validated.
		w.leaf(lhs, rhs)
		return true, nil
	case a.List != nil:
		return w.doList(tr, a.List, lhs, rhs, validate)
	}
	return false, errNotCreateFast
}

// leaf is compareWalker.doLeaf for a node whose rhs is set: added or modified, which a
// create records alike.
func (w *createWalker) leaf(lhs, rhs value.Value) {
	if lhs == nil || !value.EqualsUsing(w.alloc, rhs, lhs) {
		w.fields.insert(w.path)
	}
}

// validateSubtree validates what the comparison does not descend into (atomic maps and
// lists, empty ones, duplicate list items), as the library's validation walk does.
func (w *createWalker) validateSubtree(tr schema.TypeRef, v value.Value) error {
	if _, err := typed.AsTyped(v, w.schema, tr, typed.AllowDuplicates); err != nil {
		return errNotCreateFast
	}
	return nil
}

// wholeLeaf is an atomic or empty map or list: one leaf, its contents validated.
func (w *createWalker) wholeLeaf(tr schema.TypeRef, lhsV, rhsV value.Value, validate bool) (bool, error) {
	if validate {
		if err := w.validateSubtree(tr, rhsV); err != nil {
			return false, err
		}
	}
	w.leaf(lhsV, rhsV)
	return true, nil
}

func (w *createWalker) doMap(tr schema.TypeRef, t *schema.Map, lhsV, rhsV value.Value, validate bool) (bool, error) {
	var lhs, rhs value.Map
	if lhsV != nil && lhsV.IsMap() {
		lhs = lhsV.AsMapUsing(w.alloc)
		defer w.alloc.Free(lhs)
	}
	switch {
	case rhsV.IsMap():
		rhs = rhsV.AsMapUsing(w.alloc)
		defer w.alloc.Free(rhs)
	case rhsV.IsNull():
	case validate:
		return false, errNotCreateFast
	}
	emptyPromoteToLeaf := (lhs == nil || lhs.Empty()) && (rhs == nil || rhs.Empty())
	if t.ElementRelationship == schema.Atomic || emptyPromoteToLeaf {
		return w.wholeLeaf(tr, lhsV, rhsV, validate)
	}
	if rhs == nil {
		// Only the empty object's fields: the comparison finds them removed,
		// which a create does not record.
		return false, nil
	}
	var err error
	visit := func(key string, lhsItem, rhsItem value.Value) bool {
		if rhsItem == nil {
			return true
		}
		fieldType := t.ElementType
		if sf, ok := t.FindField(key); ok {
			fieldType = sf.Type
		} else if validate && (t.ElementType == schema.TypeRef{}) {
			err = errNotCreateFast // "field not declared in schema"
			return false
		}
		w.path = append(w.path, fieldpath.PathElement{FieldName: &key})
		err = w.walk(fieldType, lhsItem, rhsItem)
		w.path = w.path[:len(w.path)-1]
		return err == nil
	}
	if lhs == nil {
		rhs.IterateUsing(w.alloc, func(key string, v value.Value) bool { return visit(key, nil, v) })
	} else {
		value.MapZipUsing(w.alloc, lhs, rhs, value.Unordered, visit)
	}
	return false, err
}

func (w *createWalker) doList(tr schema.TypeRef, t *schema.List, lhsV, rhsV value.Value, validate bool) (bool, error) {
	var lhs, rhs value.List
	if lhsV != nil && lhsV.IsList() {
		lhs = lhsV.AsListUsing(w.alloc)
		defer w.alloc.Free(lhs)
	}
	switch {
	case rhsV.IsList():
		rhs = rhsV.AsListUsing(w.alloc)
		defer w.alloc.Free(rhs)
	case rhsV.IsNull():
	case validate:
		return false, errNotCreateFast
	}
	emptyPromoteToLeaf := (lhs == nil || lhs.Length() == 0) && (rhs == nil || rhs.Length() == 0)
	if t.ElementRelationship == schema.Atomic || emptyPromoteToLeaf {
		return w.wholeLeaf(tr, lhsV, rhsV, validate)
	}
	if lhs == nil && rhs == nil {
		return false, nil
	}
	return false, w.listItems(t, lhs, rhs)
}

// listItems is compareWalker.visitListItems. Items of a list that is neither atomic
// nor associative have no path element, which fails the comparison.
func (w *createWalker) listItems(t *schema.List, lhs, rhs value.List) error {
	type items struct {
		pe    fieldpath.PathElement
		left  []value.Value
		right []value.Value
	}
	var order []*items
	byPE := fieldpath.MakePathElementMap(0)
	get := func(pe fieldpath.PathElement) *items {
		if v, ok := byPE.Get(pe); ok {
			return v.(*items)
		}
		it := &items{pe: pe}
		byPE.Insert(pe, it)
		order = append(order, it)
		return it
	}
	if lhs != nil {
		for i := 0; i < lhs.Length(); i++ {
			child := lhs.At(i)
			pe, err := listItemToPathElement(w.alloc, w.schema, t, child)
			if err != nil {
				return errNotCreateFast
			}
			it := get(pe)
			it.left = append(it.left, child)
		}
	}
	for i := 0; rhs != nil && i < rhs.Length(); i++ {
		child := rhs.At(i)
		pe, err := listItemToPathElement(w.alloc, w.schema, t, child)
		if err != nil {
			return errNotCreateFast
		}
		it := get(pe)
		it.right = append(it.right, child)
	}
	for _, it := range order {
		l, r := it.left, it.right
		switch {
		case len(r) == 0:
			// Removed only.
		case len(l) <= 1 && len(r) == 1:
			var lv value.Value
			if len(l) == 1 {
				lv = l[0]
			}
			w.path = append(w.path, it.pe)
			err := w.walk(t.ElementType, lv, r[0])
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		default:
			// Duplicates: compared as a whole, validated item by item.
			for _, v := range r {
				if err := w.validateSubtree(t.ElementType, v); err != nil {
					return err
				}
			}
			p := append(w.path, it.pe)
			switch {
			case len(l) >= 2 && len(r) >= 2:
				if !listEqual(l, r) {
					w.fields.insert(p)
				}
			case len(l) >= 2: // and one item on the right
				w.path = p
				err := w.walk(t.ElementType, nil, r[0])
				w.path = w.path[:len(w.path)-1]
				if err != nil {
					return err
				}
			default: // two or more on the right
				w.fields.insert(p)
			}
		}
	}
	return nil
}

func listEqual(l, r []value.Value) bool {
	if len(l) != len(r) {
		return false
	}
	for i := range l {
		if !value.Equals(l[i], r[i]) {
			return false
		}
	}
	return true
}

// deduceAtom is structured-merge-diff's: which of atom's types val has, or atom itself.
func deduceAtom(atom schema.Atom, val value.Value) schema.Atom {
	switch {
	case val == nil:
	case val.IsFloat(), val.IsInt(), val.IsString(), val.IsBool():
		if atom.Scalar != nil {
			return schema.Atom{Scalar: atom.Scalar}
		}
	case val.IsList():
		if atom.List != nil {
			return schema.Atom{List: atom.List}
		}
	case val.IsMap():
		if atom.Map != nil {
			return schema.Atom{Map: atom.Map}
		}
	}
	return atom
}

// scalarValid is structured-merge-diff's validateScalar.
func scalarValid(t schema.Scalar, v value.Value) bool {
	if v == nil || v.IsNull() {
		return true
	}
	switch t {
	case schema.Numeric:
		return v.IsFloat() || v.IsInt()
	case schema.String:
		return v.IsString()
	case schema.Boolean:
		return v.IsBool()
	case schema.Untyped:
		return v.IsFloat() || v.IsInt() || v.IsString() || v.IsBool()
	}
	return false
}

// listItemToPathElement is structured-merge-diff's: the key of an associative list's item.
func listItemToPathElement(a value.Allocator, s *schema.Schema, list *schema.List, child value.Value) (fieldpath.PathElement, error) {
	pe := fieldpath.PathElement{}
	if list.ElementRelationship != schema.Associative {
		return pe, errors.New("invalid indexing of non-associative list")
	}
	if len(list.Keys) == 0 {
		switch {
		case child.IsMap(), child.IsList(), child.IsNull():
			return pe, errors.New("associative list without keys has a non-scalar element")
		}
		pe.Value = &child
		return pe, nil
	}
	if child.IsNull() || !child.IsMap() {
		return pe, errors.New("associative list with keys has a null or non-map element")
	}
	keyMap := value.FieldList{}
	m := child.AsMapUsing(a)
	defer a.Free(m)
	for _, fieldName := range list.Keys {
		if val, ok := m.Get(fieldName); ok {
			keyMap = append(keyMap, value.Field{Name: fieldName, Value: val})
			continue
		}
		atom, ok := s.Resolve(list.ElementType)
		if !ok || atom.Map == nil {
			return pe, fmt.Errorf("couldn't find default value for %v", fieldName)
		}
		if field, _ := atom.Map.FindField(fieldName); field.Default != nil {
			keyMap = append(keyMap, value.Field{Name: fieldName, Value: value.NewValueInterface(field.Default)})
		}
	}
	if len(keyMap) == 0 {
		return pe, fmt.Errorf("associative list with keys has an element that omits all key fields %q", list.Keys)
	}
	keyMap.Sort()
	pe.Key = &keyMap
	return pe, nil
}
