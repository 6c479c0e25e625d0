package fieldmanager

import (
	"bytes"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// managedFieldsDropping is the object convertor of the field managers that record
// updates: what it converts for the library's comparison comes without
// metadata.managedFields where they cannot change the library's answer.
//
// The library takes the manager sets from the live object's managedFields before it
// converts anything, then removes them from the new object only, so the typed
// comparison walks the live object's entries (decoding each FieldsV1 from JSON, to
// validate it and to find it removed) for one effect: a manager owning
// metadata.managedFields would lose it. No manager owns it (every write strips it
// from the sets), and a FieldsV1 that is a JSON object of objects always fits its
// schema (a map of anything), so where that holds of every entry the comparison of
// the live object without them gives the same sets, at a fraction of the cost: the
// decoding was about a tenth of a status update's field tracking.
type managedFieldsDropping struct {
	runtime.ObjectConvertor
}

func (c managedFieldsDropping) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	out, err := c.ObjectConvertor.ConvertToVersion(in, target)
	if err != nil {
		return out, err
	}
	return withoutInertManagedFields(out), nil
}

// withoutInertManagedFields returns obj, or a shallow copy of it without
// managedFields where they are inert (see managedFieldsDropping). Unstructured
// objects are left alone: a shallow copy would share the metadata map.
func withoutInertManagedFields(obj runtime.Object) runtime.Object {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return obj
	}
	acc, err := meta.Accessor(obj)
	if err != nil || len(acc.GetManagedFields()) == 0 || !inertManagedFields(acc.GetManagedFields()) {
		return obj
	}
	rv := reflect.ValueOf(obj)
	if rv.Kind() != reflect.Ptr || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return obj
	}
	cp := reflect.New(rv.Elem().Type())
	cp.Elem().Set(rv.Elem())
	out, ok := cp.Interface().(runtime.Object)
	if !ok {
		return obj
	}
	cpAcc, err := meta.Accessor(out)
	if err != nil {
		return obj
	}
	cpAcc.SetManagedFields(nil)
	return out
}

// managedFieldsName is how a FieldsV1 names metadata.managedFields (or any field so
// named: the check errs on the safe side).
var managedFieldsName = []byte(`"f:managedFields"`)

// inertManagedFields reports whether no entry's FieldsV1 names managedFields or could
// fail the library's validation: each is empty or a plain JSON object of objects
// (escaping only quotes and backslashes, so that the name cannot be spelt otherwise).
func inertManagedFields(entries []metav1.ManagedFieldsEntry) bool {
	for i := range entries {
		raw := entries[i].FieldsV1.GetRawBytes()
		if len(raw) == 0 {
			continue
		}
		if raw[0] != '{' || !fieldsObject(raw) || bytes.Contains(raw, managedFieldsName) {
			return false
		}
	}
	return true
}

// fieldsObject reports whether raw is one JSON object whose values are JSON objects,
// down to empty ones, with keys free of control characters and of escapes but \"
// and \\: the shape of every FieldsV1 the library writes.
func fieldsObject(raw []byte) bool {
	i, ok := scanFieldsObject(raw, 0, 0)
	if !ok {
		return false
	}
	return skipSpace(raw, i) == len(raw)
}

const maxFieldsDepth = 1000

func scanFieldsObject(raw []byte, i, depth int) (int, bool) {
	if depth > maxFieldsDepth {
		return 0, false
	}
	i = skipSpace(raw, i)
	if i >= len(raw) || raw[i] != '{' {
		return 0, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = scanPlainString(raw, i); !ok {
			return 0, false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != ':' {
			return 0, false
		}
		if i, ok = scanFieldsObject(raw, i+1, depth+1); !ok {
			return 0, false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return 0, false
		}
		switch raw[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return 0, false
		}
	}
}

// scanPlainString scans a JSON string at raw[i] whose only escapes are \" and \\
// (the library writes a list item's key, itself JSON, so).
func scanPlainString(raw []byte, i int) (int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, false
	}
	for i++; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(raw) || raw[i+1] != '"' && raw[i+1] != '\\' {
				return 0, false
			}
			i++
		case c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
