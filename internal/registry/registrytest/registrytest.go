// Package registrytest holds the assertions the registry packages' table tests share:
// validation errors as a client sees them in Status causes, printer columns, and
// finding a resource by name.
package registrytest

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
