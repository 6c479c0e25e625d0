package apiregistration

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// fieldErr is the part of a validation error a client sees in a Status cause.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func assertErrs(t *testing.T, errs field.ErrorList, want []fieldErr) {
	t.Helper()
	got := make([]fieldErr, 0, len(errs))
	for _, e := range errs {
		got = append(got, fieldErr{e.Type, e.Field})
	}
	if len(want) == 0 {
		want = []fieldErr{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %v, want %v\nfull: %v", got, want, errs)
	}
}

// threeDaysAgo is a creation time whose AGE cell prints as "3d".
var threeDaysAgo = metav1.NewTime(time.Now().Add(-72 * time.Hour))

func findResource(t *testing.T, name string) *registry.Resource {
	t.Helper()
	for _, r := range Resources() {
		if r.Resource == name {
			return r
		}
	}
	t.Fatalf("no resource %q", name)
	return nil
}

var ctx = context.Background()

func assertColumns(t *testing.T, r *registry.Resource, want ...string) {
	t.Helper()
	var got []string
	for _, c := range r.Printer.Columns {
		got = append(got, c.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v, want %v", got, want)
	}
}
