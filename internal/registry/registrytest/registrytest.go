// Package registrytest holds the assertions the registry packages' table tests share:
// validation errors as a client sees them in Status causes, printer columns, and
// finding a resource by name.
package registrytest

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// FieldErr is the part of a validation error a client sees in a Status cause. It is an
// alias of an unnamed struct so tables in other packages may write {Type, "path"}.
type FieldErr = struct {
	Type  field.ErrorType
	Field string
}

// AssertErrs fails t unless errs are exactly want, in order.
func AssertErrs(t *testing.T, errs field.ErrorList, want []FieldErr) {
	t.Helper()
	got := make([]FieldErr, 0, len(errs))
	for _, e := range errs {
		got = append(got, FieldErr{e.Type, e.Field})
	}
	if len(want) == 0 {
		want = []FieldErr{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %v, want %v\nfull: %v", got, want, errs)
	}
}

// ThreeDaysAgo is a creation time whose AGE cell prints as "3d".
func ThreeDaysAgo() metav1.Time { return metav1.NewTime(time.Now().Add(-72 * time.Hour)) }

// Find returns the resource named name (plural) among resources, or fails t.
func Find(t *testing.T, resources []*registry.Resource, name string) *registry.Resource {
	t.Helper()
	for _, r := range resources {
		if r.Resource == name {
			return r
		}
	}
	t.Fatalf("no resource %q", name)
	return nil
}

// AssertColumns fails t unless r prints exactly the columns want.
func AssertColumns(t *testing.T, r *registry.Resource, want ...string) {
	t.Helper()
	var got []string
	for _, c := range r.Printer.Columns {
		got = append(got, c.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v, want %v", got, want)
	}
}

// WantError is one expected validation error, where and what kind; an alias of an
// unnamed struct so tables in other packages may write {"spec.x", field.ErrorTypeRequired}.
type WantError = struct {
	Field string
	Type  field.ErrorType
}

// CreateErrors defaults obj and runs res's create steps, returning the validation errors.
func CreateErrors(res *registry.Resource, obj runtime.Object) field.ErrorList {
	ctx := context.Background()
	res.Strategy.Default(obj)
	res.Strategy.PrepareForCreate(ctx, obj)
	return res.Strategy.Validate(ctx, obj)
}

// UpdateErrors defaults both objects and runs res's update steps.
func UpdateErrors(res *registry.Resource, obj, old runtime.Object) field.ErrorList {
	ctx := context.Background()
	res.Strategy.Default(old)
	res.Strategy.Default(obj)
	res.Strategy.PrepareForUpdate(ctx, obj, old)
	return res.Strategy.ValidateUpdate(ctx, obj, old)
}

// CheckErrors fails t unless errs hold exactly the wanted errors, in any order.
func CheckErrors(t *testing.T, errs field.ErrorList, want []WantError) {
	t.Helper()
	got := map[WantError]int{}
	for _, e := range errs {
		got[WantError{Field: e.Field, Type: e.Type}]++
	}
	for _, w := range want {
		if got[w] == 0 {
			t.Errorf("missing error %s %q; got %v", w.Type, w.Field, errs)
			continue
		}
		got[w]--
	}
	for w, n := range got {
		if n > 0 {
			t.Errorf("unexpected error %s %q; all: %v", w.Type, w.Field, errs)
		}
	}
}

// CheckRow fails t unless p prints obj as want, the age cell (at ageIndex) left out.
func CheckRow(t *testing.T, p *registry.Printer, obj runtime.Object, ageIndex int, want []interface{}) {
	t.Helper()
	row := p.Row(obj)
	if len(row) != len(p.Columns) {
		t.Fatalf("row has %d cells for %d columns: %v", len(row), len(p.Columns), row)
	}
	if p.Columns[ageIndex].Name != "Age" {
		t.Fatalf("column %d is %q, not Age", ageIndex, p.Columns[ageIndex].Name)
	}
	got := append(append([]interface{}{}, row[:ageIndex]...), row[ageIndex+1:]...)
	if len(got) != len(want) {
		t.Fatalf("cells = %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cell %d = %#v, want %#v (row %#v)", i, got[i], want[i], got)
		}
	}
}

// ColumnNames lists a printer's column names.
func ColumnNames(p *registry.Printer) []string {
	var names []string
	for _, c := range p.Columns {
		names = append(names, c.Name)
	}
	return names
}
