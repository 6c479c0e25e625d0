package fieldmanager

import (
	"reflect"
	"sync"

	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// fieldPlans keeps, per Go struct type and the schema map it is walked as, what the
// create walk otherwise looks up for each of its fields on every create: the field's
// schema type (FindField) already resolved, and where the field sits in the struct.
// It belongs to one kind's schema (emptyKind), so a custom resource's new schema
// starts afresh.
type fieldPlans struct {
	m sync.Map // planKey → []fieldPlan
}

type planKey struct {
	t reflect.Type
	m *schema.Map
}

// fieldPlan is one field of a struct as the walk visits it, in the library's order
// (OrderedFields: by JSON name).
type fieldPlan struct {
	entry *value.FieldCacheEntry
	// index is the field's index in the struct where entry.GetFrom reads exactly that
	// field (checked when the plan is made); -1 where it reads through inline fields.
	index    int
	declared bool // the schema declares the field, or the map has an element type
	typ      schema.TypeRef
	atom     schema.Atom // typ resolved, if resolved
	resolved bool
}

// of returns t's field plans as a field of map m of schema s.
func (p *fieldPlans) of(s *schema.Schema, t reflect.Type, m *schema.Map) []fieldPlan {
	key := planKey{t, m}
	if v, ok := p.m.Load(key); ok {
		return v.([]fieldPlan)
	}
	ordered := value.TypeReflectEntryOf(t).OrderedFields()
	plans := make([]fieldPlan, len(ordered))
	zero := reflect.New(t).Elem()
	for i, f := range ordered {
		fp := fieldPlan{entry: f, index: fieldIndex(zero, f), typ: m.ElementType, declared: true}
		if sf, ok := m.FindField(f.JsonName); ok {
			fp.typ = sf.Type
		} else if (m.ElementType == schema.TypeRef{}) {
			fp.declared = false
		}
		if fp.declared {
			fp.atom, fp.resolved = s.Resolve(fp.typ)
		}
		plans[i] = fp
	}
	p.m.Store(key, plans)
	return plans
}

// fieldIndex is the index of the struct's own field that f.GetFrom reads, found by
// reading both from a zero struct and comparing where they sit, or -1 if none is.
func fieldIndex(zero reflect.Value, f *value.FieldCacheEntry) int {
	got := f.GetFrom(zero)
	if !got.CanAddr() {
		return -1
	}
	for i := range zero.NumField() {
		if own := zero.Field(i); own.Type() == got.Type() && own.UnsafeAddr() == got.UnsafeAddr() && own.Type().Size() > 0 {
			return i
		}
	}
	return -1
}
